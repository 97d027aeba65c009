"""Part 1: the machine's limit for the training input pipeline, and how close the pipeline gets.

The limit is cores x the single-thread rate of the pipeline's per-image work: the same map
function (parse, decode_and_crop_jpeg, resize, normalize, flip, brightness, contrast) on
serialized records already in memory, one thread, no reading or decompression. The full
pipeline (uncached, so it does that work for every image, plus reading gzip shards, shuffling
and batching) is measured back to back with it, run after run.
CPU milliseconds per image are recorded too: unlike images/s they barely move when other
processes share the machine, and their ratio is the pipeline's overhead per image. So is the
same map run in parallel over the in-memory records: how far the machine's cores really scale
(SMT siblings, shared caches and clocks make cores x single thread an upper bound).
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
from data_prep.runtime.cores import usable_cores

TITLE = "The input pipeline against the machine's limit"

PREFIX = "input.limit"


def per_image_work(records: list[bytes], parallel: bool) -> tf.data.Dataset:
    """The training map over in-memory records: sequential on one private thread, or parallel
    on every core (how far the machine itself scales, without reading or shuffling)."""
    seed = tf.constant([CONFIG.seed, 0], tf.int64)

    def work(index, record):
        return input_pipeline.augment_example(
            record, input_pipeline.element_seed(seed, index), CONFIG.image_size, NORMALIZATION
        )

    dataset = tf.data.Dataset.from_tensor_slices(records).repeat().enumerate()
    if parallel:
        dataset = dataset.map(work, tf.data.AUTOTUNE, deterministic=False)
        return input_pipeline.prefetch(dataset.batch(CONFIG.batch_size))
    options = tf.data.Options()
    options.threading.private_threadpool_size = 1
    options.threading.max_intra_op_parallelism = 1
    dataset = dataset.map(work).batch(CONFIG.batch_size).with_options(options)
    return without_injected_prefetch(dataset)


def full_pipeline(pattern: str) -> tf.data.Dataset:
    plan = input_pipeline.plan_pipeline(
        "train", pattern, CONFIG.image_size, CONFIG.batch_size, 0, training=True
    )
    return input_pipeline.training_dataset(
        plan, CONFIG.image_size, NORMALIZATION, CONFIG.shuffle_buffer, CONFIG.seed
    )


def load_records(pattern: str) -> list[bytes]:
    files = input_pipeline.resolve_files(pattern)
    return list(tf.data.TFRecordDataset(files, compression_type="GZIP").as_numpy_iterator())


def run(workdir: str) -> list[dict]:
    pattern = photo_shards(workdir, IMAGES)
    records = load_records(pattern)
    batches = len(records) // CONFIG.batch_size
    images = batches * CONFIG.batch_size
    single, in_memory, full = [], [], []
    for _ in range(RUNS):
        single.append(time_batches(per_image_work(records, parallel=False), batches))
        full.append(time_batches(full_pipeline(pattern), batches))
        in_memory.append(time_batches(per_image_work(records, parallel=True), batches))
    single_wall, single_cpu = min(single)
    full_wall, full_cpu = min(full)
    single_rate, full_rate = images / single_wall, images / full_wall
    in_memory_rate = images / min(in_memory)[0]
    limit = usable_cores() * single_rate
    return [
        {"name": f"{PREFIX}.cores", "value": usable_cores(), "unit": "cores"},
        {"name": f"{PREFIX}.single_thread", "value": single_rate, "unit": "images/s"},
        {
            "name": f"{PREFIX}.limit",
            "value": limit,
            "unit": "images/s",
            "baseline": f"{PREFIX}.single_thread",
            "ratio": limit / single_rate,
        },
        {
            "name": f"{PREFIX}.full_pipeline",
            "value": full_rate,
            "unit": "images/s",
            "baseline": f"{PREFIX}.limit",
            "ratio": full_rate / limit,
        },
        {
            "name": f"{PREFIX}.in_memory_parallel",
            "value": in_memory_rate,
            "unit": "images/s",
            "baseline": f"{PREFIX}.limit",
            "ratio": in_memory_rate / limit,
        },
        {
            "name": f"{PREFIX}.single_thread_cpu",
            "value": 1000 * single_cpu / images,
            "unit": "CPU ms/image",
        },
        {
            "name": f"{PREFIX}.full_pipeline_cpu",
            "value": 1000 * full_cpu / images,
            "unit": "CPU ms/image",
            "baseline": f"{PREFIX}.single_thread_cpu",
            "ratio": full_cpu / single_cpu,
        },
    ]


def chart(records: list[dict], path: str) -> None:
    bar_chart(
        records,
        path,
        f"Input limit: {IMAGES} photo JPEGs (~500x375) -> {CONFIG.image_size}px, augmented; "
        f"limit = cores x single thread",
        "images/s",
    )


def section(records: list[dict]) -> Section:
    full, cpu = named(records, "full_pipeline"), named(records, "full_pipeline_cpu")
    in_memory = named(records, "in_memory_parallel")
    return default_section(
        __doc__,
        records,
        notes=(
            f"The full training pipeline reaches {full['ratio']:.2f}x the limit (cores x the "
            "single-thread rate of the same per-image work on records in memory); that work run "
            f"in parallel in memory reaches {in_memory['ratio']:.2f}x, how far the cores scale.",
            f"Per image the full pipeline spends {cpu['ratio']:.2f}x the CPU of the in-memory "
            "work: its overhead for reading, decompressing, shuffling and batching.",
        ),
    )


def headline(records: list[dict]) -> list[tuple[str, str]]:
    full, limit = named(records, "full_pipeline"), named(records, "limit")
    return [
        (
            "The training input pipeline against the machine's limit",
            f"{full['ratio']:.2f}x ({full['value']:,.0f} of {limit['value']:,.0f} images/s)",
        )
    ]
