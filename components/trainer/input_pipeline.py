"""The training and evaluation tf.data pipelines, one named function per stage, read top to bottom.

Training: list_files (shuffled) -> interleave_records (parallel, non-deterministic) -> shuffle ->
repeat -> one parallel map (parse, decode, resize, normalize, augment) -> batch (drop remainder,
so every step has the same static shapes and never retraces) -> prefetch.
When the decoded split fits the cache budget, parse + decode + resize move before the shuffle into
their own map followed by cache(): decoding then happens once instead of every epoch, and the
random augmentation stays after the cache, so each epoch still sees fresh augmentations.
Evaluation: the same stages in a fixed order, no augmentation, cached when it fits.
"""

from __future__ import annotations

import dataclasses
import logging

import tensorflow as tf

from components.trainer.preprocessing import CHANNELS, Normalization, preprocess_image
from data_prep import features

MAX_PARALLEL_READS = 16  # shards read at once; more only adds open files and buffers
CACHED_BYTES_PER_VALUE = 4  # cached images are float32
# Augmentation strengths. Shapes keep their class under flips and mild zoom; brightness is in
# normalized units (about 1 std of pixel values per 1.0).
MIN_CROP_FRACTION = 0.85
BRIGHTNESS_DELTA = 0.2
CONTRAST_RANGE = (0.8, 1.2)

_PARSE_SPEC_KEYS = (features.IMAGE, features.LABEL)


@dataclasses.dataclass(frozen=True)
class PipelinePlan:
    """What a pipeline will do and why; logged, and returned in the training metrics."""

    split: str
    files: tuple[str, ...]
    examples: int
    batch_size: int  # global batch
    training: bool
    cache: bool
    cache_bytes: int  # estimated memory of the cached split
    cache_reason: str
    parallel_reads: int

    def describe(self) -> str:
        remainder = "dropped" if self.training else "kept"
        return (
            f"{self.split}: {len(self.files)} shard(s), {self.examples} examples, "
            f"batch {self.batch_size} (partial last batch {remainder}), "
            f"{self.parallel_reads} parallel read(s), map parallelism AUTOTUNE, "
            f"cache {'on' if self.cache else 'off'} ({self.cache_reason})"
        )


def resolve_files(patterns: list[str] | str) -> list[str]:
    """Sorted files matching the patterns (TFX passes split folders as globs)."""
    patterns = [patterns] if isinstance(patterns, str) else list(patterns)
    files = sorted({path for pattern in patterns for path in tf.io.gfile.glob(pattern)})
    if not files:
        raise ValueError(f"no files match {patterns}")
    return files


def count_examples(files: list[str]) -> int:
    """Counts records by reading every shard once (fast: no parsing or decoding)."""
    dataset = tf.data.TFRecordDataset(
        files, compression_type="GZIP", num_parallel_reads=min(len(files), MAX_PARALLEL_READS)
    )
    return int(dataset.reduce(tf.constant(0, tf.int64), lambda count, _: count + 1))


def plan_pipeline(
    split: str,
    patterns: list[str] | str,
    image_size: int,
    batch_size: int,
    cache_budget_bytes: int,
    training: bool,
) -> PipelinePlan:
    """Resolves the shards, counts the examples and decides whether the split is cached."""
    files = resolve_files(patterns)
    examples = count_examples(files)
    cache_bytes = examples * image_size * image_size * CHANNELS * CACHED_BYTES_PER_VALUE
    cache = cache_bytes <= cache_budget_bytes
    relation = "fits" if cache else "exceeds"
    reason = (
        f"{examples} x {image_size}x{image_size}x{CHANNELS} x {CACHED_BYTES_PER_VALUE} B = "
        f"{cache_bytes / 2**20:.1f} MiB {relation} budget {cache_budget_bytes / 2**20:.1f} MiB"
    )
    plan = PipelinePlan(
        split=split,
        files=tuple(files),
        examples=examples,
        batch_size=batch_size,
        training=training,
        cache=cache,
        cache_bytes=cache_bytes if cache else 0,
        cache_reason=reason,
        parallel_reads=min(len(files), MAX_PARALLEL_READS),
    )
    logging.info("input pipeline %s", plan.describe())
    return plan


# Stages, in pipeline order.


def list_files(files: tuple[str, ...], shuffle: bool, seed: int | None = None) -> tf.data.Dataset:
    """The shard names; for training, shuffled afresh every epoch."""
    dataset = tf.data.Dataset.from_tensor_slices(list(files))
    if shuffle:
        dataset = dataset.shuffle(len(files), seed=seed, reshuffle_each_iteration=True)
    return dataset


def interleave_records(
    filenames: tf.data.Dataset, parallel_reads: int, deterministic: bool
) -> tf.data.Dataset:
    """Serialized tf.Examples read from several gzip shards at once."""
    return filenames.interleave(
        lambda path: tf.data.TFRecordDataset(path, compression_type="GZIP"),
        cycle_length=parallel_reads,
        num_parallel_calls=tf.data.AUTOTUNE,
        deterministic=deterministic,
    )


def decode_example(
    record: tf.Tensor, image_size: int, normalization: Normalization
) -> tuple[tf.Tensor, tf.Tensor]:
    """A serialized tf.Example -> (preprocessed image, int64 label)."""
    spec = features.feature_spec()
    parsed = tf.io.parse_single_example(record, {key: spec[key] for key in _PARSE_SPEC_KEYS})
    image = preprocess_image(parsed[features.IMAGE], image_size, normalization)
    return image, parsed[features.LABEL]


def augment(image: tf.Tensor, seed: tf.Tensor) -> tf.Tensor:
    """Random flip, zoom crop, brightness and contrast of one preprocessed image.

    Stateless ops keyed by `seed` (shape [2]): the same seed gives the same result eagerly and
    inside tf.data, and the output shape stays static.
    """
    flip_seed, crop_seed, brightness_seed, contrast_seed = tf.unstack(
        tf.random.experimental.stateless_split(seed, 4)
    )
    image = tf.image.stateless_random_flip_left_right(image, flip_seed)
    image = random_crop(image, crop_seed)
    image = tf.image.stateless_random_brightness(image, BRIGHTNESS_DELTA, brightness_seed)
    return tf.image.stateless_random_contrast(image, *CONTRAST_RANGE, contrast_seed)


def random_crop(image: tf.Tensor, seed: tf.Tensor) -> tf.Tensor:
    """A random square crop of MIN_CROP_FRACTION..1 of the side, resized back to full size."""
    size_seed, offset_seed = tf.unstack(tf.random.experimental.stateless_split(seed, 2))
    side = tf.random.stateless_uniform([], size_seed, MIN_CROP_FRACTION, 1.0)
    top_left = tf.random.stateless_uniform([2], offset_seed, 0.0, 1.0) * (1.0 - side)
    box = tf.concat([top_left, top_left + side], axis=0)
    size = image.shape[:2]
    return tf.image.crop_and_resize(image[tf.newaxis], box[tf.newaxis], [0], size)[0]


def shuffle_and_repeat(dataset: tf.data.Dataset, buffer_size: int, seed: int) -> tf.data.Dataset:
    """Reshuffled every epoch, then repeated forever: fit counts steps, not epochs of data."""
    return dataset.shuffle(buffer_size, seed=seed, reshuffle_each_iteration=True).repeat()


def batch(dataset: tf.data.Dataset, batch_size: int, drop_remainder: bool) -> tf.data.Dataset:
    return dataset.batch(batch_size, drop_remainder=drop_remainder)


def prefetch(dataset: tf.data.Dataset) -> tf.data.Dataset:
    """Last stage: overlaps producing the next batch with the current training step."""
    return dataset.prefetch(tf.data.AUTOTUNE)


# Pipelines.


def training_dataset(
    plan: PipelinePlan,
    image_size: int,
    normalization: Normalization,
    shuffle_buffer: int,
    seed: int,
) -> tf.data.Dataset:
    """Infinite (image, label) batches of static shape [batch, size, size, 3] and [batch]."""

    def decode(record):
        return decode_example(record, image_size, normalization)

    def augment_element(index, element):
        image, label = element
        return augment(image, tf.stack([tf.constant(seed, tf.int64), index])), label

    def decode_and_augment(index, record):
        return augment_element(index, decode(record))

    dataset = list_files(plan.files, shuffle=True, seed=seed)
    dataset = interleave_records(dataset, plan.parallel_reads, deterministic=False)
    if plan.cache:
        dataset = dataset.map(decode, tf.data.AUTOTUNE, deterministic=False).cache()
        dataset = shuffle_and_repeat(dataset, shuffle_buffer, seed).enumerate()
        dataset = dataset.map(augment_element, tf.data.AUTOTUNE, deterministic=False)
    else:
        dataset = shuffle_and_repeat(dataset, shuffle_buffer, seed).enumerate()
        dataset = dataset.map(decode_and_augment, tf.data.AUTOTUNE, deterministic=False)
    dataset = batch(dataset, plan.batch_size, drop_remainder=True)
    return prefetch(dataset)


def eval_dataset(
    plan: PipelinePlan, image_size: int, normalization: Normalization
) -> tf.data.Dataset:
    """Every example once, in a fixed order, unaugmented; the last batch may be partial."""

    def decode(record):
        return decode_example(record, image_size, normalization)

    dataset = list_files(plan.files, shuffle=False)
    dataset = interleave_records(dataset, plan.parallel_reads, deterministic=True)
    dataset = dataset.map(decode, tf.data.AUTOTUNE, deterministic=True)
    if plan.cache:
        dataset = dataset.cache()
    dataset = batch(dataset, plan.batch_size, drop_remainder=False)
    return prefetch(dataset)
