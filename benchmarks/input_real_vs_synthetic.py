"""Part 4: does the real input pipeline slow training down?

train()'s graph-mode training engine (the default small_cnn at the default TrainerConfig's image
size, batch, precision and steps_per_execution) is fed, alternately, the training pipeline on the
embedded default dataset's shards and a synthetic batch already in memory, repeated. The ratio of
their training images/s is what the input pipeline costs the step: 1.0 means nothing. On a CPU
the pipeline's threads compete with the step's for the same cores, so this is the stricter
setting; the CPU ms per image of both say how much CPU the pipeline adds. On a machine shared with
other busy processes images/s is not comparable: a process with more runnable threads (the real
pipeline's) gets a larger share of the contended cores.
"""

from __future__ import annotations

import time

import tensorflow as tf
import tf_keras as keras

from benchmarks.input_common import CONFIG, NORMALIZATION, RUNS, bar_chart
from benchmarks.input_data import default_dataset_shards
from benchmarks.report import Section, default_section, named
from components.training import input_pipeline
from components.training.engine import TrainingEngine
from components.training.preprocessing import CHANNELS
from components.training.runtime import choose_jit_compile, choose_precision
from components.training.schedule import plan_phases
from components.training.train import model_and_optimizer
from data_prep.default_dataset import CLASS_NAMES

TITLE = "The real input pipeline against data in memory"

PREFIX = "input.real_vs_synthetic"
EPOCHS = 3  # timed per measurement, after one untimed warm-up epoch


def synthetic_dataset() -> tf.data.Dataset:
    """One batch of random normalized images and labels, in memory, repeated forever."""
    shape = [CONFIG.batch_size, CONFIG.image_size, CONFIG.image_size, CHANNELS]
    images = tf.random.stateless_normal(shape, seed=[CONFIG.seed, 1])
    labels = tf.random.stateless_uniform(
        [CONFIG.batch_size], [CONFIG.seed, 2], 0, len(CLASS_NAMES), tf.int64
    )
    return tf.data.Dataset.from_tensors((images, labels)).repeat()


def training_engine(strategy: tf.distribute.Strategy, steps_per_epoch: int) -> TrainingEngine:
    """train()'s model, optimizer and graph-mode step, at the default config on this device."""
    keras.utils.set_random_seed(CONFIG.seed)
    with strategy.scope():
        model, optimizer, _ = model_and_optimizer(
            CONFIG,
            list(CLASS_NAMES),
            choose_precision(CONFIG),
            plan_phases(CONFIG, steps_per_epoch, warm_start=False),
            NORMALIZATION,
        )
        return TrainingEngine(model, optimizer, strategy, jit_compile=choose_jit_compile(CONFIG))


def time_training(engine: TrainingEngine, iterator, steps: int) -> tuple[float, float]:
    """Training images/s and process CPU ms per image over EPOCHS epochs of `steps` steps (in
    calls of steps_per_execution, as train() makes them), after one warm-up epoch."""
    timings = []
    for _ in range(EPOCHS + 1):
        wall, cpu = time.perf_counter(), time.process_time()
        done = 0
        while done < steps:
            calls = min(CONFIG.steps_per_execution, steps - done)
            engine.run(iterator, calls).numpy()
            done += calls
        timings.append((time.perf_counter() - wall, time.process_time() - cpu))
    images = EPOCHS * steps * CONFIG.batch_size
    wall = sum(seconds[0] for seconds in timings[1:])
    cpu = sum(seconds[1] for seconds in timings[1:])
    return images / wall, 1000 * cpu / images


def run(workdir: str) -> list[dict]:
    plan = input_pipeline.plan_pipeline(
        "train",
        default_dataset_shards(workdir),
        CONFIG.image_size,
        CONFIG.batch_size,
        CONFIG.cache_budget_bytes,
        training=True,
    )
    steps = plan.examples // CONFIG.batch_size
    real = input_pipeline.training_dataset(
        plan, CONFIG.image_size, NORMALIZATION, CONFIG.shuffle_buffer, CONFIG.seed
    )
    strategy = tf.distribute.get_strategy()
    engine = training_engine(strategy, steps)  # one engine: both feed the same traced step
    real_batches = iter(strategy.experimental_distribute_dataset(real))
    synthetic_batches = iter(strategy.experimental_distribute_dataset(synthetic_dataset()))
    real_runs, synthetic_runs = [], []
    for _ in range(RUNS):
        real_runs.append(time_training(engine, real_batches, steps))
        synthetic_runs.append(time_training(engine, synthetic_batches, steps))
    (real_rate, real_cpu), (synthetic_rate, synthetic_cpu) = max(real_runs), max(synthetic_runs)
    synthetic_name = f"{PREFIX}.synthetic"
    return [
        {"name": synthetic_name, "value": synthetic_rate, "unit": "images/s"},
        {
            "name": f"{PREFIX}.real",
            "value": real_rate,
            "unit": "images/s",
            "baseline": synthetic_name,
            "ratio": real_rate / synthetic_rate,
        },
        {"name": f"{PREFIX}.synthetic_cpu", "value": synthetic_cpu, "unit": "CPU ms/image"},
        {
            "name": f"{PREFIX}.real_cpu",
            "value": real_cpu,
            "unit": "CPU ms/image",
            "baseline": f"{PREFIX}.synthetic_cpu",
            "ratio": real_cpu / synthetic_cpu,
        },
        {
            "name": f"{PREFIX}.train_function_traces",
            "value": engine.traces,
            "unit": "traces",
        },
    ]


def chart(records: list[dict], path: str) -> None:
    bar_chart(
        records,
        path,
        f"Training {CONFIG.model} ({CONFIG.image_size}px, batch {CONFIG.batch_size}) on the "
        "embedded dataset: real pipeline vs synthetic in-memory batch",
        "images/s",
    )


def section(records: list[dict]) -> Section:
    real, cpu = named(records, "real"), named(records, "real_cpu")
    traces = named(records, "train_function_traces")["value"]
    return default_section(
        __doc__,
        records,
        notes=(
            f"Training on the real input pipeline runs at {real['ratio']:.2f}x the images/s of "
            "a synthetic batch already in memory (1.0: the input costs the step nothing), at "
            f"{cpu['ratio']:.2f}x its CPU per image; the step was traced {traces:.0f} time(s).",
        ),
    )


def headline(records: list[dict]) -> list[tuple[str, str]]:
    real = named(records, "real")
    return [
        (
            "Training fed by the input pipeline against a batch in memory",
            f"{real['ratio']:.2f}x the images/s",
        )
    ]
