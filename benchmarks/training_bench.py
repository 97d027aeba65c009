"""Training step speed: eager vs graph vs graph + XLA vs Keras fit with steps_per_execution;
float32 vs mixed_bfloat16; one replica vs two logical CPU replicas.

Every contender trains the default model (TrainerConfig defaults: small_cnn, 64x64, batch 64)
with the trainer's own engine and optimizer on one in-memory batch (so the step is measured,
not the input pipeline), in its own process: logical devices are fixed when TensorFlow starts,
and a policy or an XLA cache must not leak into the next contender. Each contender makes a
first call of `warmup` steps (tracing, XLA compilation), then `steps` timed steps; the best of
`repeats` timed passes counts, since the machine may be shared.

Sizes come from the environment so a quick run is possible; `make bench` uses the defaults:
  BENCH_TRAINING_STEPS    timed steps per pass (default 32; a multiple of steps_per_execution)
  BENCH_TRAINING_WARMUP   steps of the untimed first call (default 8)
  BENCH_TRAINING_REPEATS  timed passes, the best counts (default 2)
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import components  # noqa: F401  (sets TF_USE_LEGACY_KERAS before TensorFlow loads)
from benchmarks.charts import label_bars

TITLE = "The training step: graph mode, XLA, fit, bfloat16, two replicas"
STEPS = int(os.environ.get("BENCH_TRAINING_STEPS", "32"))
WARMUP = int(os.environ.get("BENCH_TRAINING_WARMUP", "8"))
REPEATS = int(os.environ.get("BENCH_TRAINING_REPEATS", "2"))
CHILD_TIMEOUT_SECONDS = 900

# name -> settings over the default; `mode`: eager, graph or fit.
CONTENDERS = {
    "eager": {"mode": "eager", "per_execution": 1},
    "graph.per_step": {"mode": "graph", "per_execution": 1},
    "graph": {"mode": "graph"},
    "graph.xla": {"mode": "graph", "xla": True},
    "fit": {"mode": "fit"},
    "graph.mixed_bfloat16": {"mode": "graph", "precision": "mixed_bfloat16"},
    "graph.2_replicas": {"mode": "graph", "devices": 2},
}
# Each contender's baseline, for the ratio.
BASELINES = {
    "graph.per_step": "eager",
    "graph": "eager",
    "graph.xla": "graph",
    "fit": "graph",
    "graph.mixed_bfloat16": "graph",
    "graph.2_replicas": "graph",
}


def measure(spec: dict) -> dict:
    """One contender, in this process. spec: model, image_size, batch_size (per replica), mode,
    per_execution, precision, xla, devices, warmup, steps, repeats; data 'synthetic' or 'real'
    with shards (a glob of ingested shards, decoded every step)."""
    import tensorflow as tf

    devices = spec.get("devices", 1)
    gpus = tf.config.list_physical_devices("GPU")
    if devices > 1 and not gpus:
        cpu = tf.config.list_physical_devices("CPU")[0]
        logical = [tf.config.LogicalDeviceConfiguration()] * devices
        tf.config.set_logical_device_configuration(cpu, logical)

    from components.training import input_pipeline, runtime
    from components.training.engine import TrainingEngine
    from components.training.preprocessing import Normalization
    from components.training.schedule import plan_phases
    from components.training.train import model_and_optimizer
    from components.training.trainer_config import TrainerConfig

    defaults = TrainerConfig()
    config = TrainerConfig(
        model=spec.get("model", defaults.model),
        image_size=spec.get("image_size", defaults.image_size),
        batch_size=spec.get("batch_size", defaults.batch_size),
        shuffle_buffer=10 * spec.get("batch_size", defaults.batch_size) * devices,
        cache_budget_bytes=0,  # real data is decoded every step: the input pipeline's real cost
        precision=spec.get("precision", "float32"),
        jit_compile=spec.get("xla", False),
        steps_per_execution=spec.get("per_execution", defaults.steps_per_execution),
    ).validate()
    runtime.configure_runtime(config)
    found = tf.config.list_logical_devices("GPU") or tf.config.list_logical_devices("CPU")
    strategy = tf.distribute.MirroredStrategy([d.name for d in found[:devices]])
    global_batch = config.batch_size * strategy.num_replicas_in_sync
    classes = 7
    if spec.get("data", "synthetic") == "synthetic":
        shape = [global_batch, config.image_size, config.image_size, 3]
        with tf.device("/cpu:0"):  # tf.data holds host tensors; the strategy copies each batch
            batch = (
                tf.random.normal(shape),
                tf.random.uniform([global_batch], 0, classes, tf.int64),
            )
        dataset = tf.data.Dataset.from_tensors(batch).repeat()
    else:
        plan = input_pipeline.plan_pipeline(
            "train", spec["shards"], config.image_size, global_batch, 0, True
        )
        normalization = Normalization((120.0,) * 3, (60.0,) * 3)
        dataset = input_pipeline.training_dataset(
            plan, config.image_size, normalization, config.shuffle_buffer, config.seed
        )
    with strategy.scope():
        model, optimizer, _ = model_and_optimizer(
            config,
            [str(label) for label in range(classes)],
            config.precision,
            plan_phases(config, 1000, warm_start=False),
            Normalization((120.0,) * 3, (60.0,) * 3),
        )
        engine = TrainingEngine(
            model,
            optimizer,
            strategy,
            jit_compile=config.jit_compile,
            graph=spec["mode"] != "eager",
        )
    per_call = config.steps_per_execution
    if spec["mode"] == "fit":
        first_call, passes, traces = _fit(model, optimizer, dataset, config, spec)
        waited = 0.0  # fit's loop is Keras' own: its input wait is not measured
    else:
        iterator = iter(strategy.experimental_distribute_dataset(dataset))

        def train(steps: int) -> None:
            for _ in range(steps // per_call):
                float(engine.run(iterator, per_call))  # float(): waits for the step to finish

        started = time.perf_counter()
        train(spec["warmup"])
        first_call = time.perf_counter() - started
        wait_before = float(engine.input_wait_seconds.numpy())
        passes = []
        for _ in range(spec.get("repeats", 1)):
            started = time.perf_counter()
            train(spec["steps"])
            passes.append(time.perf_counter() - started)
        waited = float(engine.input_wait_seconds.numpy()) - wait_before
        traces = engine.traces
    seconds = min(passes)
    return {
        "input_wait_share": waited / sum(passes),
        "steps_per_s": spec["steps"] / seconds,
        "images_per_s": spec["steps"] * global_batch / seconds,
        "first_call_s": first_call,
        "traces": traces,
        "replicas": strategy.num_replicas_in_sync,
        "devices": [d.name for d in found[:devices]],
        "global_batch": global_batch,
    }


def _fit(model, optimizer, dataset, config, spec) -> tuple[float, list[float], int]:
    """Keras fit with steps_per_execution, timed per epoch inside one fit call, with the
    engine's optimizer and loss (sparse cross-entropy over the model's probabilities): the
    first epoch includes tracing, each later epoch is one timed pass."""
    import tf_keras as keras

    model.compile(
        optimizer=optimizer,
        loss=keras.losses.SparseCategoricalCrossentropy(),
        steps_per_execution=config.steps_per_execution,
        jit_compile=config.jit_compile,
    )
    seconds = []

    class EpochTimer(keras.callbacks.Callback):
        # Without _supports_tf_logs, Keras converts the logs to numbers before on_epoch_end,
        # which waits for the epoch's last step.
        def on_epoch_begin(self, epoch, logs=None):
            self.started = time.perf_counter()

        def on_epoch_end(self, epoch, logs=None):
            seconds.append(time.perf_counter() - self.started)

    epochs = 1 + spec.get("repeats", 1)
    model.fit(
        dataset, epochs=epochs, steps_per_epoch=spec["steps"], callbacks=[EpochTimer()], verbose=0
    )
    return seconds[0], seconds[1:], model.train_function.experimental_get_tracing_count()


def measure_in_child(spec: dict, timeout: float = CHILD_TIMEOUT_SECONDS) -> dict:
    """measure(spec) in a fresh Python process; raises RuntimeError with its stderr on failure."""
    command = [sys.executable, "-m", "benchmarks.training_bench", json.dumps(spec)]
    child = subprocess.run(command, capture_output=True, text=True, timeout=timeout, check=False)
    if child.returncode != 0:
        raise RuntimeError(f"contender {spec} failed: {child.stderr[-3000:]}")
    return json.loads(child.stdout.strip().splitlines()[-1])


def run(workdir: str, steps: int = STEPS, warmup: int = WARMUP, repeats: int = REPEATS) -> list:
    del workdir  # nothing to write besides the records
    results = {}
    for name, settings in CONTENDERS.items():
        spec = {"warmup": warmup, "steps": steps, "repeats": repeats, **settings}
        results[name] = measure_in_child(spec)
        print(f"training.{name}: {results[name]['steps_per_s']:.2f} steps/s", flush=True)
    records = []
    for name, result in results.items():
        record = {
            "name": f"training.{name}.steps_per_s",
            "value": result["steps_per_s"],
            "unit": "steps/s",
            "images_per_s": result["images_per_s"],
            "traces": result["traces"],
            "replicas": result["replicas"],
        }
        if name in BASELINES:
            baseline = results[BASELINES[name]]
            record["baseline"] = f"training.{BASELINES[name]}.steps_per_s"
            # Per image, so that two replicas (a bigger global batch per step) compare fairly.
            record["ratio"] = result["images_per_s"] / baseline["images_per_s"]
        records.append(record)
        records.append(
            {"name": f"training.{name}.first_call", "value": result["first_call_s"], "unit": "s"}
        )
    return records


def chart(records: list[dict], path: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    speed = [r for r in records if r["unit"] == "steps/s"]
    figure, axis = plt.subplots(figsize=(11, 4))
    names = [r["name"].removeprefix("training.").removesuffix(".steps_per_s") for r in speed]
    bars = axis.bar(names, [r["images_per_s"] for r in speed], color="#4a7ab5")

    def _label(record: dict) -> str:
        label = f"{record['images_per_s']:.0f}"
        if "ratio" in record:
            label += f"\n{record['ratio']:.2f}x {record['baseline'].split('.')[1]}"
        return label

    label_bars(axis, bars, [_label(record) for record in speed])
    axis.set_title("Training step, default model (small_cnn 64x64, batch 64): images/s")
    axis.tick_params(axis="x", labelsize=8)
    figure.tight_layout()
    figure.savefig(path, dpi=110)
    plt.close(figure)


def _label(record: dict) -> str:
    return record["name"].removeprefix("training.").removesuffix(".steps_per_s")


def headline(records: list[dict]) -> list[tuple[str, str]]:
    compared = {_label(r): r for r in records if "ratio" in r}
    return [
        (
            "The training step in graph mode (tf.function), per image",
            ", ".join(
                f"{name} {record['ratio']:.2f}x {record['baseline'].split('.')[1]}"
                for name, record in compared.items()
                if name in ("graph", "graph.xla", "fit")
            ),
        )
    ]


def meaning(records: list[dict]) -> list[str]:
    compared = [r for r in records if "ratio" in r]
    first = {r["name"]: r["value"] for r in records if r["name"].endswith(".first_call")}
    return [
        "Images/s of each contender against its baseline: "
        + ", ".join(
            f"{_label(r)} {r['ratio']:.2f}x {r['baseline'].split('.')[1]}" for r in compared
        )
        + ".",
        f"The first call (tracing, compilation) takes {first['training.graph.first_call']:.1f} "
        f"s in graph mode and {first['training.graph.xla.first_call']:.1f} s under XLA.",
    ]


if __name__ == "__main__":
    print(json.dumps(measure(json.loads(sys.argv[1]))))
