"""The training and evaluation tf.data pipelines, one named function per stage, read top to bottom.

Training: list_files (this input pipeline's shards, shuffled) -> interleave_records (parallel,
non-deterministic) -> shuffle -> repeat -> one parallel map (parse, decode with a random crop via
decode_and_crop_jpeg, resize, normalize, flip, brightness, contrast) -> batch (drop remainder, so
every step has the same static shapes and never retraces) -> soft labels (optional: label
smoothing, MixUp or CutMix on whole batches) -> prefetch.
When the decoded split fits the cache budget, parse + decode + resize + normalize move before the
shuffle into their own map followed by cache(): decoding then happens once instead of every epoch,
and the random augmentation (crop of the decoded image, flip, color) stays after the cache, so each
epoch still sees fresh augmentations. It then runs on whole batches (after batch): for these cheap
ops a per-image map's overhead would cost more than the ops themselves.
The soft-label stage, when any of its switches is on, is the last map: after the cache and the
batching, on whole batches, so mixing partners come from the shuffled batch and the int labels
become float [batch, classes] targets of static shape (the step still traces once). Off, the
pipeline is exactly the one without it.
Under a distribution strategy each input pipeline (one per worker) reads its own shards, whole
files, and batches per replica; see training_dataset.
Evaluation: the same stages in a fixed order, no augmentation, cached when it fits.
"""

from __future__ import annotations

import dataclasses
import logging

import tensorflow as tf

from components.training.preprocessing import (
    CHANNELS,
    Normalization,
    augment_batch,
    augment_encoded,
    preprocess_image,
)
from components.training.trainer_config import DEFAULT_AUGMENT, AugmentConfig, TrainerConfig
from data_prep.contract import features
from data_prep.runtime.cores import usable_cores

LOGGER = logging.getLogger(__name__)
MAX_PARALLEL_READS = 16  # shards read at once; more only adds open files and buffers
CACHED_BYTES_PER_VALUE = 4  # cached images are float32

_PARSE_SPEC_KEYS = (features.IMAGE, features.LABEL)
# Folded into an input pipeline's base seed for the soft-label stage, so its draws are independent
# of the augmentation's (which use the base seed itself).
_SOFT_LABEL_SEED_SALT = 1


@dataclasses.dataclass(frozen=True)
class SoftLabels:
    """The soft-label stage's settings (TrainerConfig's label_smoothing, mixup_alpha,
    cutmix_alpha) and the class count of the one-hot targets."""

    classes: int
    label_smoothing: float = 0.0
    mixup_alpha: float = 0.0
    cutmix_alpha: float = 0.0

    @classmethod
    def of(cls, config: TrainerConfig, classes: int) -> SoftLabels | None:
        """The config's soft-label settings; None when all are off (labels stay int)."""
        if not config.soft_labels:
            return None
        return cls(classes, config.label_smoothing, config.mixup_alpha, config.cutmix_alpha)

    def describe(self) -> str:
        parts = [f"label smoothing {self.label_smoothing:g}"] if self.label_smoothing else []
        if self.mixup_alpha:
            parts.append(f"MixUp alpha {self.mixup_alpha:g}")
        if self.cutmix_alpha:
            parts.append(f"CutMix alpha {self.cutmix_alpha:g}")
        return f"soft labels ({', '.join(parts)}; per batch)"


@dataclasses.dataclass(frozen=True)
class PipelinePlan:
    """What a pipeline will do and why; reported at training start and in the training metrics."""

    split: str
    files: tuple[str, ...]
    examples: int
    batch_size: int  # global batch
    training: bool
    cache: bool
    cache_bytes: int  # estimated memory of the cached split
    cache_reason: str
    parallel_reads: int

    def describe(
        self,
        input_context: tf.distribute.InputContext | None = None,
        augment: AugmentConfig = DEFAULT_AUGMENT,
    ) -> str:
        """One line: shards, batch, parallelism, augmentation, cache decision; with an input
        context, also which shards and what batch this input pipeline gets."""
        remainder = "dropped" if self.training else "kept"
        if self.training:
            how = "on cached images, per batch" if self.cache else "decode_and_crop_jpeg, per image"
            augmentation = f"augmentation {augment.describe()} ({how})"
        else:
            augmentation = "no augmentation"
        tuning = " (untuned: see without_autotuning)" if self.training else ""
        text = (
            f"{self.split}: {len(self.files)} shard(s), {self.examples} examples, "
            f"global batch {self.batch_size} (partial last batch {remainder}), "
            f"{self.parallel_reads} parallel read(s), map parallelism AUTOTUNE on "
            f"{usable_cores()} core(s), prefetch AUTOTUNE{tuning}, {augmentation}, "
            f"cache {'on' if self.cache else 'off'} ({self.cache_reason})"
        )
        if input_context is not None:
            files = pipeline_files(self.files, input_context)
            shard = record_shard(self.files, input_context)
            share = f", 1 record in {shard[0]}" if shard else ""
            text += (
                f"; input pipeline {input_context.input_pipeline_id + 1} of "
                f"{input_context.num_input_pipelines} reads {len(files)} shard(s){share}, batches "
                f"{input_context.get_per_replica_batch_size(self.batch_size)} per replica for "
                f"{input_context.num_replicas_in_sync} replica(s)"
            )
        return text


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
    LOGGER.info("input pipeline %s", plan.describe())
    return plan


def pipeline_files(
    files: tuple[str, ...], input_context: tf.distribute.InputContext | None
) -> tuple[str, ...]:
    """The shards one input pipeline reads: every num_input_pipelines-th file, so workers read
    disjoint whole files (no worker reads and discards the others' records); every file when
    there are fewer files than input pipelines (record_shard then splits their records)."""
    if input_context is None or record_shard(files, input_context) is not None:
        return files
    return files[input_context.input_pipeline_id :: input_context.num_input_pipelines]


def record_shard(
    files: tuple[str, ...], input_context: tf.distribute.InputContext | None
) -> tuple[int, int] | None:
    """(input pipelines, this pipeline's index) when the files are too few to give each input
    pipeline its own (tf.data's DATA auto-shard policy: each reads every file in the same order
    and keeps every n-th record); None when each reads whole files of its own."""
    if input_context is None or len(files) >= input_context.num_input_pipelines:
        return None
    return input_context.num_input_pipelines, input_context.input_pipeline_id


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


def shuffle_and_repeat(dataset: tf.data.Dataset, buffer_size: int, seed: int) -> tf.data.Dataset:
    """Reshuffled every epoch, then repeated forever: fit counts steps, not epochs of data."""
    return dataset.shuffle(buffer_size, seed=seed, reshuffle_each_iteration=True).repeat()


def parse_example(record: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
    """A serialized tf.Example -> (encoded image bytes, int64 label)."""
    spec = features.feature_spec()
    parsed = tf.io.parse_single_example(record, {key: spec[key] for key in _PARSE_SPEC_KEYS})
    return parsed[features.IMAGE], parsed[features.LABEL]


def decode_example(
    record: tf.Tensor, image_size: int, normalization: Normalization
) -> tuple[tf.Tensor, tf.Tensor]:
    """A serialized tf.Example -> (preprocessed image, int64 label): evaluation, and training
    before a cache."""
    encoded, label = parse_example(record)
    return preprocess_image(encoded, image_size, normalization), label


def augment_example(
    record: tf.Tensor,
    seed: tf.Tensor,
    image_size: int,
    normalization: Normalization,
    augment: AugmentConfig = DEFAULT_AUGMENT,
) -> tuple[tf.Tensor, tf.Tensor]:
    """A serialized tf.Example -> (augmented image, int64 label): the whole per-image work of
    uncached training in one function, so one parallel map runs it."""
    encoded, label = parse_example(record)
    return augment_encoded(encoded, image_size, normalization, seed, augment), label


def element_seed(seed: tf.Tensor, index: tf.Tensor) -> tf.Tensor:
    """The stateless seed of the index-th element of an input pipeline with base seed [2]."""
    return tf.random.experimental.stateless_fold_in(seed, index)


def batch(dataset: tf.data.Dataset, batch_size: int, drop_remainder: bool) -> tf.data.Dataset:
    return dataset.batch(batch_size, drop_remainder=drop_remainder)


def soft_label_batch(
    images: tf.Tensor, labels: tf.Tensor, soft: SoftLabels, seed: tf.Tensor
) -> tuple[tf.Tensor, tf.Tensor]:
    """A training batch with int labels [batch] -> the batch with float32 targets [batch,
    classes]: one-hot, smoothed, then MixUp or CutMix with the batch in reverse order as
    partners (the batch is shuffled already, so that is a random pairing)."""
    targets = tf.one_hot(labels, soft.classes, dtype=tf.float32)
    if soft.label_smoothing:
        targets = targets * (1.0 - soft.label_smoothing) + soft.label_smoothing / soft.classes
    if soft.mixup_alpha:
        return mixup(images, targets, soft.mixup_alpha, seed)
    if soft.cutmix_alpha:
        return cutmix(images, targets, soft.cutmix_alpha, seed)
    return images, targets


def beta_sample(shape: list[int], alpha: float, seed: tf.Tensor) -> tf.Tensor:
    """Stateless draws from Beta(alpha, alpha), as x / (x + y) of two Gamma(alpha) draws."""
    x_seed, y_seed = tf.unstack(tf.random.experimental.stateless_split(seed, 2))
    x = tf.random.stateless_gamma(shape, x_seed, alpha)
    y = tf.random.stateless_gamma(shape, y_seed, alpha)
    return tf.math.divide_no_nan(x, x + y)  # both 0 (float underflow at tiny alpha): weight 0


def mixup(
    images: tf.Tensor, targets: tf.Tensor, alpha: float, seed: tf.Tensor
) -> tuple[tf.Tensor, tf.Tensor]:
    """Each image and its targets blended with its partner's by a weight from Beta(alpha, alpha),
    drawn per image (Zhang et al., 2018)."""
    weight = beta_sample([images.shape[0]], alpha, seed)
    image_weight = weight[:, tf.newaxis, tf.newaxis, tf.newaxis]
    mixed_images = image_weight * images + (1.0 - image_weight) * tf.reverse(images, [0])
    target_weight = weight[:, tf.newaxis]
    mixed_targets = target_weight * targets + (1.0 - target_weight) * tf.reverse(targets, [0])
    return mixed_images, mixed_targets


def cutmix(
    images: tf.Tensor, targets: tf.Tensor, alpha: float, seed: tf.Tensor
) -> tuple[tf.Tensor, tf.Tensor]:
    """Each image with a box of its partner pasted in, and its targets mixed by the box's share
    of the pixels (Yun et al., 2019). The box keeps the image's aspect ratio, its area 1 - w of
    the image for w from Beta(alpha, alpha), centred anywhere and clipped at the edges; the label
    weight is the clipped box's exact pixel fraction."""
    count, height, width = images.shape[0], images.shape[1], images.shape[2]
    weight_seed, centre_seed = tf.unstack(tf.random.experimental.stateless_split(seed, 2))
    side = tf.sqrt(1.0 - beta_sample([count], alpha, weight_seed))
    centre = tf.random.stateless_uniform([count, 2], centre_seed, 0.0, 1.0)
    sizes = tf.constant([height, width], tf.float32)
    half = side[:, tf.newaxis] * sizes / 2.0
    first = tf.cast(tf.round(tf.clip_by_value(centre * sizes - half, 0.0, sizes)), tf.int32)
    last = tf.cast(tf.round(tf.clip_by_value(centre * sizes + half, 0.0, sizes)), tf.int32)
    rows = tf.range(height)[tf.newaxis, :]
    columns = tf.range(width)[tf.newaxis, :]
    in_rows = (rows >= first[:, :1]) & (rows < last[:, :1])  # [count, height]
    in_columns = (columns >= first[:, 1:]) & (columns < last[:, 1:])  # [count, width]
    pasted = in_rows[:, :, tf.newaxis] & in_columns[:, tf.newaxis, :]  # [count, height, width]
    mixed_images = tf.where(pasted[..., tf.newaxis], tf.reverse(images, [0]), images)
    share = tf.reduce_mean(tf.cast(pasted, tf.float32), axis=[1, 2])[:, tf.newaxis]
    mixed_targets = (1.0 - share) * targets + share * tf.reverse(targets, [0])
    return mixed_images, mixed_targets


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
    input_context: tf.distribute.InputContext | None = None,
    soft_labels: SoftLabels | None = None,
    augment: AugmentConfig = DEFAULT_AUGMENT,
) -> tf.data.Dataset:
    """Infinite (image, label) batches of static shape [batch, size, size, 3] and [batch] (int64);
    with soft_labels, the labels are float32 targets [batch, classes]. Images are augmented as
    `augment` sets.

    Without an input context, batches are global batches. With one (from
    strategy.distribute_datasets_from_function), this pipeline reads only its shards
    (pipeline_files) and makes per-replica batches; its seeds differ from other pipelines'.
    """
    dataset = training_batches(
        plan, image_size, normalization, shuffle_buffer, seed, input_context, augment
    )
    if soft_labels is not None:
        pipeline_id = 0 if input_context is None else input_context.input_pipeline_id
        base_seed = tf.random.experimental.stateless_fold_in(
            tf.constant([seed, pipeline_id], tf.int64), _SOFT_LABEL_SEED_SALT
        )

        def soften(index, element):
            images, labels = element
            return soft_label_batch(images, labels, soft_labels, element_seed(base_seed, index))

        dataset = dataset.enumerate().map(soften, tf.data.AUTOTUNE, deterministic=False)
    return without_autotuning(prefetch(dataset))


def without_autotuning(dataset: tf.data.Dataset) -> tf.data.Dataset:
    """The training pipeline runs untuned: AUTOTUNE's map parallelism is then its default (the
    cores, up to 16) and its prefetch buffer grows when the step waits. TensorFlow 2.16's tuning
    thread can miss its iterator's deletion and sleep out its optimization period (doubling up to
    60 s), and the deletion waits for it, so train() could return a minute after its last line.
    The same holds for the per-device dataset a MultiDeviceIterator builds, which cannot be
    untuned: runtime.training_iterator keeps it out where it adds nothing. Untuned, training runs as
    fast and waits as little for input. Evaluation pipelines end after one pass, before their
    tuning period grows, and keep it."""
    options = tf.data.Options()
    options.autotune.enabled = False
    return dataset.with_options(options)


def pipeline_records(
    files: tuple[str, ...], shard: tuple[int, int] | None, seed: int
) -> tf.data.Dataset:
    """One input pipeline's serialized examples, one pass: its shards in a new order every epoch,
    read in parallel; with a record shard (record_shard), every file in a fixed order, so that
    the pipelines' every-n-th records are disjoint."""
    dataset = list_files(files, shuffle=shard is None, seed=seed)
    dataset = interleave_records(
        dataset, min(len(files), MAX_PARALLEL_READS), deterministic=shard is not None
    )
    return dataset if shard is None else dataset.shard(*shard)


def training_batches(
    plan: PipelinePlan,
    image_size: int,
    normalization: Normalization,
    shuffle_buffer: int,
    seed: int,
    input_context: tf.distribute.InputContext | None = None,
    augment: AugmentConfig = DEFAULT_AUGMENT,
) -> tf.data.Dataset:
    """training_dataset without its last stages, soft labels and prefetch (for measuring what
    the prefetch adds)."""
    pipeline_id = 0 if input_context is None else input_context.input_pipeline_id
    batch_size = plan.batch_size
    if input_context is not None:
        batch_size = input_context.get_per_replica_batch_size(plan.batch_size)
    files = pipeline_files(plan.files, input_context)
    base_seed = tf.constant([seed, pipeline_id], tf.int64)

    def decode(record):
        return decode_example(record, image_size, normalization)

    def augment_cached(index, element):
        images, labels = element
        return augment_batch(images, element_seed(base_seed, index), augment), labels

    def augment_record(index, record):
        seed = element_seed(base_seed, index)
        return augment_example(record, seed, image_size, normalization, augment)

    dataset = pipeline_records(files, record_shard(plan.files, input_context), seed + pipeline_id)
    if plan.cache:
        dataset = dataset.map(decode, tf.data.AUTOTUNE, deterministic=False).cache()
        dataset = shuffle_and_repeat(dataset, shuffle_buffer, seed + pipeline_id)
        dataset = batch(dataset, batch_size, drop_remainder=True).enumerate()
        return dataset.map(augment_cached, tf.data.AUTOTUNE, deterministic=False)
    dataset = shuffle_and_repeat(dataset, shuffle_buffer, seed + pipeline_id).enumerate()
    dataset = dataset.map(augment_record, tf.data.AUTOTUNE, deterministic=False)
    return batch(dataset, batch_size, drop_remainder=True)


def eval_dataset(
    plan: PipelinePlan, image_size: int, normalization: Normalization
) -> tf.data.Dataset:
    """Every example once, in a fixed order, unaugmented; the last batch may be partial. Under
    MultiWorkerMirroredStrategy each worker evaluates its share of the batches (DATA sharding:
    the split may have fewer shards than workers) and Keras sums the metrics over workers."""

    def decode(record):
        return decode_example(record, image_size, normalization)

    dataset = list_files(plan.files, shuffle=False)
    dataset = interleave_records(dataset, plan.parallel_reads, deterministic=True)
    dataset = dataset.map(decode, tf.data.AUTOTUNE, deterministic=True)
    if plan.cache:
        dataset = dataset.cache()
    dataset = batch(dataset, plan.batch_size, drop_remainder=False)
    options = tf.data.Options()
    options.experimental_distribute.auto_shard_policy = tf.data.experimental.AutoShardPolicy.DATA
    return prefetch(dataset).with_options(options)
