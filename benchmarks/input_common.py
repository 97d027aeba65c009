"""What the input-pipeline benchmark parts share: sizes, timing and the bar chart.

Sizes come from the environment so a quick run is possible; `make bench` uses the defaults:
  BENCH_INPUT_IMAGES  photo-like JPEGs in the benchmark shards (default 5000)
  BENCH_RUNS          repetitions of each measurement; the best is kept (default 3)
The machine may be shared, so contenders of one part are measured alternately, run after run,
and each keeps its best run: what a quiet machine would show.
"""

from __future__ import annotations

import os
import textwrap
import time

import tensorflow as tf

from benchmarks.charts import label_bars, value_and_ratio
from components.training.preprocessing import Normalization
from components.training.trainer_config import TrainerConfig

IMAGES = int(os.environ.get("BENCH_INPUT_IMAGES", "5000"))
RUNS = int(os.environ.get("BENCH_RUNS", "3"))
CONFIG = TrainerConfig()  # image size, batch, shuffle buffer and cache budget of a default run
# Fixed statistics: normalization changes no cost, and computing it would cost a decode pass.
NORMALIZATION = Normalization(mean=(127.0, 127.0, 127.0), std=(64.0, 64.0, 64.0))
WARMUP_BATCHES = 4  # taken before timing: tracing, thread start-up, autotuning


def without_injected_prefetch(dataset: tf.data.Dataset) -> tf.data.Dataset:
    """Stops tf.data from adding a prefetch at the end by itself (it does by default), so a
    pipeline measured without prefetch really has none."""
    options = tf.data.Options()
    options.experimental_optimization.inject_prefetch = False
    return dataset.with_options(options)


def time_batches(
    dataset: tf.data.Dataset, batches: int, warmup: int = WARMUP_BATCHES
) -> tuple[float, float]:
    """Wall seconds and process CPU seconds to take `batches` batches, after `warmup` batches."""
    iterator = iter(dataset)
    for _ in range(warmup):
        next(iterator)
    wall, cpu = time.perf_counter(), time.process_time()
    for _ in range(batches):
        next(iterator)
    return time.perf_counter() - wall, time.process_time() - cpu


def bar_chart(records: list[dict], path: str, title: str, unit: str) -> None:
    """One bar per record with its value and, where it has one, its ratio to its baseline."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    shown = [record for record in records if record["unit"] == unit]
    figure, axis = plt.subplots(figsize=(max(6, 1.3 * len(shown)), 4))
    names = [record["name"].split(".", 2)[-1].replace("_", " ") for record in shown]
    bars = axis.bar(names, [record["value"] for record in shown], color="#4a7ab5")

    label_bars(axis, bars, [value_and_ratio(record) for record in shown])
    axis.margins(y=0.2)  # room for the labels above the bars
    axis.set_ylabel(unit)
    axis.set_title(textwrap.fill(title, 80), fontsize=9)
    axis.tick_params(axis="x", labelsize=8, rotation=20)
    figure.tight_layout()
    figure.savefig(path, dpi=110)
    plt.close(figure)
