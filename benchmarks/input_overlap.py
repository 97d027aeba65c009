"""Part 3: does prefetch overlap input with the accelerator step?

A simulated accelerator step of fixed duration consumes each batch: the host thread sleeps, as it
waits on a device, using no CPU. The step lasts as long as the pipeline takes per batch on its own
(STEP_FACTOR x), the case where overlap matters most: the ideal epoch then takes
max(input time, step time), while a pipeline that does not overlap takes their sum.
The pipeline is the uncached training pipeline, so every epoch costs the same; the epoch timed is
the second of a continuous iterator, as in training. "Without prefetch" drops only the last stage
(and stops tf.data from injecting one): tf.data still fuses the parallel map with the batch, and
that fused stage starts on the next batch as soon as one is taken, so it overlaps much of the
step too.
"""

from __future__ import annotations

import os
import time

import tensorflow as tf

from benchmarks.input_common import (
    CONFIG,
    IMAGES,
    NORMALIZATION,
    RUNS,
    bar_chart,
    without_injected_prefetch,
)
from benchmarks.input_data import photo_shards
from benchmarks.report import Section, default_section, named
from components.training import input_pipeline

TITLE = "Prefetch: input and step overlapped"

PREFIX = "input.overlap"
STEP_FACTOR = float(os.environ.get("BENCH_STEP_FACTOR", "1.0"))


def epoch_seconds(dataset: tf.data.Dataset, steps: int, step_seconds: float) -> float:
    """Seconds of the second epoch of `steps` batches, each followed by a step of step_seconds."""
    iterator = iter(dataset)
    for _ in range(steps):
        next(iterator)
        time.sleep(step_seconds)
    started = time.perf_counter()
    for _ in range(steps):
        next(iterator)
        time.sleep(step_seconds)
    return time.perf_counter() - started


def run(workdir: str) -> list[dict]:
    pattern = photo_shards(workdir, IMAGES)
    plan = input_pipeline.plan_pipeline(
        "train", pattern, CONFIG.image_size, CONFIG.batch_size, 0, training=True
    )
    steps = plan.examples // CONFIG.batch_size
    arguments = (plan, CONFIG.image_size, NORMALIZATION, CONFIG.shuffle_buffer, CONFIG.seed)
    with_prefetch = input_pipeline.training_dataset(*arguments)
    without_prefetch = without_injected_prefetch(input_pipeline.training_batches(*arguments))
    input_s = min(epoch_seconds(with_prefetch, steps, 0.0) for _ in range(RUNS))
    step_s = STEP_FACTOR * input_s / steps
    overlapped, serial = [], []
    for _ in range(RUNS):
        overlapped.append(epoch_seconds(with_prefetch, steps, step_s))
        serial.append(epoch_seconds(without_prefetch, steps, step_s))
    ideal = max(input_s, step_s * steps)
    ideal_name = f"{PREFIX}.ideal"
    return [
        {"name": f"{PREFIX}.input_only", "value": input_s, "unit": "s/epoch"},
        {"name": f"{PREFIX}.steps_only", "value": step_s * steps, "unit": "s/epoch"},
        {"name": ideal_name, "value": ideal, "unit": "s/epoch"},
        {
            "name": f"{PREFIX}.with_prefetch",
            "value": min(overlapped),
            "unit": "s/epoch",
            "baseline": ideal_name,
            "ratio": min(overlapped) / ideal,
        },
        {
            "name": f"{PREFIX}.without_prefetch",
            "value": min(serial),
            "unit": "s/epoch",
            "baseline": ideal_name,
            "ratio": min(serial) / ideal,
        },
    ]


def chart(records: list[dict], path: str) -> None:
    bar_chart(
        records,
        path,
        f"Overlap: {IMAGES} photo JPEGs per epoch, simulated step = {STEP_FACTOR:g} x input time "
        "per batch (ratio to ideal max(input, steps))",
        "s/epoch",
    )


def section(records: list[dict]) -> Section:
    with_prefetch, without = named(records, "with_prefetch"), named(records, "without_prefetch")
    return default_section(
        __doc__,
        records,
        notes=(
            f"With prefetch an epoch takes {with_prefetch['ratio']:.2f}x the ideal, max(input "
            f"time, step time); without it {without['ratio']:.2f}x (1.0: input and step fully "
            "overlap).",
        ),
    )


def headline(records: list[dict]) -> list[tuple[str, str]]:
    with_prefetch, without = named(records, "with_prefetch"), named(records, "without_prefetch")
    return [
        (
            "An epoch with prefetch against the ideal overlap (1.0)",
            f"{with_prefetch['ratio']:.2f}x; without prefetch {without['ratio']:.2f}x",
        )
    ]
