"""A few real training steps through the whole path: pipelines, fit, TensorBoard logs, export."""

import dataclasses
import json
import os
import subprocess
import sys

import numpy as np
import pytest
import tensorflow as tf

from components.trainer import export, train
from components.trainer.config import runlocal
from components.trainer.preprocessing import Normalization
from tests.components.trainer.conftest import EXAMPLES_PER_SHARD, LABEL_NAMES, SHARDS
from tests.data_prep import image_files

NORMALIZATION = Normalization(mean=(127.0, 127.0, 127.0), std=(64.0, 64.0, 64.0))


def test_tiny_training_run_exports_a_working_model(shard_pattern, tmp_path, capsys):
    config = dataclasses.replace(runlocal(), epochs=2)  # 3 steps per epoch, 2 per execution
    metrics = train.train(
        config, shard_pattern, shard_pattern, LABEL_NAMES, NORMALIZATION, str(tmp_path)
    )

    batch = runlocal().batch_size
    assert metrics["replicas"] == 1 and metrics["global_batch_size"] == batch
    assert metrics["steps_per_epoch"] == SHARDS * EXAMPLES_PER_SHARD // batch
    assert 0.0 <= metrics["eval_accuracy"] <= 1.0 and np.isfinite(metrics["train_loss"])
    # Static shapes: traced once, never again, across epochs and partial executions.
    assert metrics["train_function_traces"] == 1
    assert "cache on" in metrics["input_pipeline"]["train"]
    printed = capsys.readouterr().out
    assert "input pipeline train: 2 shard(s)" in printed and "input pipeline eval:" in printed
    assert os.listdir(tmp_path / "logs")  # TensorBoard event files

    loaded = tf.saved_model.load(metrics["serving_model_dir"])
    outputs = loaded.signatures[export.IMAGES_SIGNATURE](
        images=tf.constant([image_files.jpeg(seed=50)])
    )
    assert outputs["probabilities"].shape == (1, len(LABEL_NAMES))


_TWO_REPLICAS = """
import json, sys
import components
import tensorflow as tf
cpu = tf.config.list_physical_devices("CPU")[0]
tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * 2)
from components.trainer import train
from components.trainer.config import runlocal
from components.trainer.preprocessing import Normalization
pattern, output_dir = sys.argv[1:]
norm = Normalization((127.0,) * 3, (64.0,) * 3)
metrics = train.train(runlocal(), pattern, pattern, ["a", "b", "c"], norm, output_dir)
print("METRICS" + json.dumps(metrics))
"""


@pytest.mark.slow
def test_two_cpu_replicas_share_the_global_batch(shard_pattern, tmp_path):
    """The multi-replica path, on two logical CPUs (set before TensorFlow starts, so in a child)."""
    result = subprocess.run(
        [sys.executable, "-c", _TWO_REPLICAS, shard_pattern, str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    metrics = json.loads(result.stdout.split("METRICS")[-1])

    assert metrics["replicas"] == 2
    assert metrics["global_batch_size"] == 2 * runlocal().batch_size
    # Reported at training start: one input pipeline, batching per replica.
    assert "input pipeline 1 of 1 reads 2 shard(s), batches 4 per replica for 2" in result.stdout
    assert metrics["steps_per_epoch"] == SHARDS * EXAMPLES_PER_SHARD // (2 * runlocal().batch_size)


def test_too_few_examples_for_one_batch_fails_before_training(shard_pattern, tmp_path):
    config = dataclasses.replace(runlocal(), batch_size=64, shuffle_buffer=640)
    with pytest.raises(ValueError, match="do not fill one global batch of 64"):
        train.train(config, shard_pattern, shard_pattern, LABEL_NAMES, NORMALIZATION, str(tmp_path))
    assert not (tmp_path / "serving_model").exists()
