"""Runs train() in a fresh process, for tests that need one: logical CPU devices and
MultiWorkerMirroredStrategy are fixed when TensorFlow starts, and a SIGKILL must hit a real run.

Usage: python -m tests.components.training.train_child SPEC_JSON; prints METRICS<json> at the end.
SPEC: pattern, output_dir, optional serving_model_dir, checkpoint_dir, logical_cpus, config
(TrainerConfig fields over runlocal()).
"""

import dataclasses
import json
import sys

import components  # noqa: F401  (TF_USE_LEGACY_KERAS before TensorFlow loads)


def main() -> None:
    spec = json.loads(sys.argv[1])
    import tensorflow as tf

    if spec.get("logical_cpus", 1) > 1:
        cpu = tf.config.list_physical_devices("CPU")[0]
        devices = [tf.config.LogicalDeviceConfiguration()] * spec["logical_cpus"]
        tf.config.set_logical_device_configuration(cpu, devices)
    from components.training import train
    from components.training.preprocessing import Normalization
    from components.training.trainer_config import runlocal

    config = dataclasses.replace(runlocal(), **spec.get("config", {}))
    metrics = train.train(
        config,
        spec["pattern"],
        spec["pattern"],
        ["a", "b", "c"],
        Normalization((127.0,) * 3, (64.0,) * 3),
        spec["output_dir"],
        serving_model_dir=spec.get("serving_model_dir"),
        checkpoint_dir=spec.get("checkpoint_dir"),
    )
    print("METRICS" + json.dumps(metrics, default=str), flush=True)


if __name__ == "__main__":
    main()
