"""Part 2: what each of the seeds' techniques adds, one at a time, on the same shards and work.

1 naive: shards read one after another, a sequential map, batch, nothing overlapped (the seeds'
  starting point); then, cumulatively, 2 + parallel map, 3 + prefetch, 4 + parallel interleave,
  5 + cache (decode once; augment whole batches after the cache), and 6 the full training
  pipeline as train() builds it (adds file and record shuffling; caches because the split fits
  the default budget).
Each runs EPOCHS epochs, the first of which fills the cache where there is one, timed from the
first batch asked for: a warm-up would hide part of the cache's filling (the full pipeline's first
batch waits for its shuffle buffer, thousands of decoded images).
"""

from __future__ import annotations

import tensorflow as tf

from benchmarks.input_common import (
    CONFIG,
    IMAGES,
    NORMALIZATION,
    RUNS,
    bar_chart,
    time_batches,
    without_injected_prefetch,
)
from benchmarks.input_data import photo_shards
from benchmarks.report import Section, default_section, named
from components.training import input_pipeline
from components.training.preprocessing import augment_batch

TITLE = "What each input-pipeline technique adds"

PREFIX = "input.ablation"
EPOCHS = 2


def _augment_record(index, record):
    seed = input_pipeline.element_seed(tf.constant([CONFIG.seed, 0], tf.int64), index)
    return input_pipeline.augment_example(record, seed, CONFIG.image_size, NORMALIZATION)


def _augment_cached(index, element):
    images, labels = element
    seed = input_pipeline.element_seed(tf.constant([CONFIG.seed, 0], tf.int64), index)
    return augment_batch(images, seed), labels


def _decode(record):
    return input_pipeline.decode_example(record, CONFIG.image_size, NORMALIZATION)


def variants(plan: input_pipeline.PipelinePlan) -> dict[str, tf.data.Dataset]:
    """The pipelines in ablation order, built from input_pipeline's stages."""
    files, batch_size = list(plan.files), CONFIG.batch_size
    parallel = tf.data.AUTOTUNE

    def sequential_records():
        return tf.data.TFRecordDataset(files, compression_type="GZIP")

    def interleaved_records():
        listed = input_pipeline.list_files(plan.files, shuffle=True, seed=CONFIG.seed)
        return input_pipeline.interleave_records(listed, plan.parallel_reads, deterministic=False)

    def batched(dataset):
        return input_pipeline.batch(dataset, batch_size, drop_remainder=True)

    naive = sequential_records().repeat().enumerate().map(_augment_record)
    parallel_map = sequential_records().repeat().enumerate()
    parallel_map = parallel_map.map(_augment_record, parallel, deterministic=False)
    interleave = interleaved_records().repeat().enumerate()
    interleave = interleave.map(_augment_record, parallel, deterministic=False)
    cached = interleaved_records().map(_decode, parallel, deterministic=False).cache()
    cached = batched(cached.repeat()).enumerate()
    cached = cached.map(_augment_cached, parallel, deterministic=False)
    full = input_pipeline.training_dataset(
        plan, CONFIG.image_size, NORMALIZATION, CONFIG.shuffle_buffer, CONFIG.seed
    )
    return {
        "1_naive": without_injected_prefetch(batched(naive)),
        "2_parallel_map": without_injected_prefetch(batched(parallel_map)),
        "3_prefetch": input_pipeline.prefetch(batched(parallel_map)),
        "4_parallel_interleave": input_pipeline.prefetch(batched(interleave)),
        "5_cache": input_pipeline.prefetch(cached),
        "6_full_pipeline": full,
    }


def run(workdir: str) -> list[dict]:
    pattern = photo_shards(workdir, IMAGES)
    plan = input_pipeline.plan_pipeline(
        "train", pattern, CONFIG.image_size, CONFIG.batch_size, CONFIG.cache_budget_bytes, True
    )
    if not plan.cache:
        raise RuntimeError(f"the ablation expects a cached split: {plan.describe()}")
    batches = EPOCHS * (plan.examples // CONFIG.batch_size)
    seconds: dict[str, float] = {}
    for _ in range(RUNS):
        for name, dataset in variants(plan).items():
            wall, _ = time_batches(dataset, batches, warmup=0)
            seconds[name] = min(wall, seconds.get(name, wall))
    naive = f"{PREFIX}.1_naive"
    records = []
    for name, wall in seconds.items():
        rate = batches * CONFIG.batch_size / wall
        record = {"name": f"{PREFIX}.{name}", "value": rate, "unit": "images/s", "epochs": EPOCHS}
        if records:
            record.update(baseline=naive, ratio=rate / records[0]["value"])
        records.append(record)
    return records


def chart(records: list[dict], path: str) -> None:
    bar_chart(
        records,
        path,
        f"Input ablation: {IMAGES} photo JPEGs, {EPOCHS} epochs, cumulative techniques "
        "(ratio to naive)",
        "images/s",
    )


def section(records: list[dict]) -> Section:
    compared = [record for record in records if "ratio" in record]
    best = max(compared, key=lambda record: record["ratio"])
    full = named(records, "6_full_pipeline")
    return default_section(
        __doc__,
        records,
        notes=(
            f"{records[0]['epochs']} epochs per variant; each row adds one technique to the row "
            "above.",
            f"The largest gain: {best['name'].rsplit('.', 1)[-1]}, {best['ratio']:.2f}x the naive "
            f"pipeline; the pipeline as train() builds it, {full['ratio']:.2f}x.",
        ),
    )


def headline(records: list[dict]) -> list[tuple[str, str]]:
    gains = ", ".join(
        f"{record['name'].rsplit('.', 1)[-1].split('_', 1)[-1].replace('_', ' ')} "
        f"{record['ratio']:.2f}x"
        for record in records
        if "ratio" in record
    )
    return [("Each input technique added in turn, against the naive pipeline", gains)]


def meaning(records: list[dict]) -> list[str]:
    compared = [record for record in records if "ratio" in record]
    best = max(compared, key=lambda record: record["ratio"])
    full = named(records, "6_full_pipeline")
    return [
        f"Each variant adds one technique to the one before it ({records[0]['epochs']} epochs "
        f"each). The largest gain is {best['name'].rsplit('.', 1)[-1].split('_', 1)[-1]}'s, "
        f"{best['ratio']:.2f}x the naive pipeline; the pipeline as train() builds it runs at "
        f"{full['ratio']:.2f}x."
    ]
