"""The tf.data pipelines: static training shapes, complete deterministic evaluation, cache rules,
sharding by file across input pipelines."""

import numpy as np
import pytest
import tensorflow as tf

from components.training import input_pipeline
from components.training.preprocessing import Normalization
from components.training.trainer_config import TrainerConfig
from tests.components.training.conftest import EXAMPLES_PER_SHARD, LABEL_NAMES, SHARDS

NORMALIZATION = Normalization(mean=(127.0, 127.0, 127.0), std=(64.0, 64.0, 64.0))
SIZE = 32
BATCH = 4
EXAMPLES = SHARDS * EXAMPLES_PER_SHARD
ONE_IMAGE_BYTES = SIZE * SIZE * 3 * 4


def _plan(pattern, training=True, budget=2**30):
    return input_pipeline.plan_pipeline("train", pattern, SIZE, BATCH, budget, training)


def test_plan_counts_shards_and_examples(shard_pattern):
    plan = _plan(shard_pattern)

    assert len(plan.files) == plan.parallel_reads == SHARDS
    assert plan.examples == EXAMPLES
    assert plan.cache and plan.cache_bytes == EXAMPLES * ONE_IMAGE_BYTES
    assert "cache on" in plan.describe() and "fits budget" in plan.describe()
    assert f"{SHARDS} shard(s)" in plan.describe() and "map parallelism AUTOTUNE" in plan.describe()


def test_cache_is_off_when_the_estimate_exceeds_the_budget(shard_pattern):
    fits = _plan(shard_pattern, budget=EXAMPLES * ONE_IMAGE_BYTES)
    too_big = _plan(shard_pattern, budget=EXAMPLES * ONE_IMAGE_BYTES - 1)

    assert fits.cache
    assert not too_big.cache and too_big.cache_bytes == 0
    assert "cache off" in too_big.describe() and "exceeds budget" in too_big.describe()


def test_no_matching_files_is_an_error(tmp_path):
    with pytest.raises(ValueError, match="no files match"):
        input_pipeline.resolve_files(str(tmp_path / "*.gz"))


@pytest.mark.parametrize("budget", [2**30, 0], ids=["cached", "uncached"])
def test_training_batches_have_fully_static_shapes(shard_pattern, budget):
    plan = _plan(shard_pattern, budget=budget)
    dataset = input_pipeline.training_dataset(plan, SIZE, NORMALIZATION, 40, seed=0)

    images, labels = dataset.element_spec
    assert images.shape == (BATCH, SIZE, SIZE, 3) and images.dtype == tf.float32
    assert labels.shape == (BATCH,) and labels.dtype == tf.int64
    # 14 examples in batches of 4: eight batches cross several epoch boundaries, all full.
    for images, labels in dataset.take(8):
        assert images.shape == (BATCH, SIZE, SIZE, 3)
        assert set(labels.numpy()) <= set(range(len(LABEL_NAMES)))
        assert np.isfinite(images.numpy()).all()


def test_eval_sees_every_example_once_in_a_fixed_order(shard_pattern):
    plan = _plan(shard_pattern, training=False)
    dataset = input_pipeline.eval_dataset(plan, SIZE, NORMALIZATION)

    first = [labels.numpy() for _, labels in dataset]
    second = [labels.numpy() for _, labels in dataset]
    sizes = [len(labels) for labels in first]

    assert sizes == [BATCH, BATCH, BATCH, EXAMPLES - 3 * BATCH]  # the partial batch is kept
    np.testing.assert_array_equal(np.concatenate(first), np.concatenate(second))
    # Shards are read round-robin (one example from each in turn), always in the same order.
    indices = np.arange(EXAMPLES).reshape(SHARDS, EXAMPLES_PER_SHARD).T.ravel()
    np.testing.assert_array_equal(np.concatenate(first), indices % len(LABEL_NAMES))


def test_eval_images_are_unaugmented(shard_pattern):
    """The cached and uncached eval pipelines give identical images, epoch after epoch."""
    cached = input_pipeline.eval_dataset(_plan(shard_pattern, False), SIZE, NORMALIZATION)
    uncached = input_pipeline.eval_dataset(_plan(shard_pattern, False, 0), SIZE, NORMALIZATION)

    for (a, _), (b, _), (c, _) in zip(cached, cached, uncached, strict=True):
        np.testing.assert_array_equal(a.numpy(), b.numpy())
        np.testing.assert_array_equal(a.numpy(), c.numpy())


def test_decode_example_eager_equals_map(shard_dir):
    files = sorted(str(path) for path in shard_dir.iterdir())
    record = next(iter(tf.data.TFRecordDataset(files[:1], compression_type="GZIP")))

    def fn(value):
        return input_pipeline.decode_example(value, SIZE, NORMALIZATION)

    image, label = fn(record)
    mapped_image, mapped_label = next(iter(tf.data.Dataset.from_tensors(record).map(fn)))

    np.testing.assert_array_equal(image.numpy(), mapped_image.numpy())
    assert label.numpy() == mapped_label.numpy() == 0


@pytest.mark.parametrize("budget", [2**30, 0], ids=["cached", "uncached"])
def test_training_step_never_retraces_across_epochs(shard_pattern, budget):
    """14 examples in batches of 4: every epoch ends in a partial batch, which is dropped, so a
    step with no fixed input signature is traced once for all batches."""
    plan = _plan(shard_pattern, budget=budget)
    dataset = input_pipeline.training_dataset(plan, SIZE, NORMALIZATION, 40, seed=0)

    @tf.function
    def step(images, labels):
        return tf.reduce_sum(images) + tf.cast(tf.reduce_sum(labels), tf.float32)

    for images, labels in dataset.take(3 * EXAMPLES // BATCH + 1):  # a few epochs
        step(images, labels)
    assert step.experimental_get_tracing_count() == 1


def test_training_images_are_augmented_afresh_every_epoch(shard_pattern):
    """Cached images are augmented after the cache: over epochs no batch repeats an earlier one."""
    plan = _plan(shard_pattern)
    dataset = input_pipeline.training_dataset(plan, SIZE, NORMALIZATION, 40, seed=0)
    images = np.concatenate([batch.numpy() for batch, _ in dataset.take(3 * EXAMPLES // BATCH)])
    assert len(np.unique(images.reshape(len(images), -1), axis=0)) == len(images)


def test_augment_example_eager_equals_map(shard_dir):
    files = sorted(str(path) for path in shard_dir.iterdir())
    record = next(iter(tf.data.TFRecordDataset(files[:1], compression_type="GZIP")))
    seed = input_pipeline.element_seed(tf.constant([0, 0], tf.int64), tf.constant(5, tf.int64))

    def fn(value, seed):
        return input_pipeline.augment_example(value, seed, SIZE, NORMALIZATION)

    image, label = fn(record, seed)
    mapped_image, mapped_label = next(iter(tf.data.Dataset.from_tensors((record, seed)).map(fn)))

    np.testing.assert_allclose(image.numpy(), mapped_image.numpy(), rtol=1e-6, atol=1e-6)
    assert label.numpy() == mapped_label.numpy() == 0
    assert image.shape == (SIZE, SIZE, 3)


def _context(pipeline_id, pipelines=2, replicas=4):
    return tf.distribute.InputContext(pipelines, pipeline_id, replicas)


def test_input_pipelines_read_disjoint_whole_shards(shard_pattern):
    plan = _plan(shard_pattern)
    per_pipeline = [input_pipeline.pipeline_files(plan.files, _context(i)) for i in range(2)]

    assert [len(files) for files in per_pipeline] == [1, 1]
    assert sorted(per_pipeline[0] + per_pipeline[1]) == sorted(plan.files)
    assert input_pipeline.pipeline_files(plan.files, None) == plan.files
    assert input_pipeline.record_shard(plan.files, _context(0)) is None


def test_fewer_shards_than_input_pipelines_split_by_record(shard_pattern):
    """Two shards over three input pipelines: each reads both and keeps its every third record,
    so the pipelines' records are disjoint and together every record once."""
    plan = _plan(shard_pattern)
    per_pipeline = []
    for index in range(3):
        context = _context(index, pipelines=3)
        files = input_pipeline.pipeline_files(plan.files, context)
        shard = input_pipeline.record_shard(plan.files, context)
        assert files == plan.files and shard == (3, index)
        records = input_pipeline.pipeline_records(files, shard, seed=index)
        per_pipeline.append([record.numpy() for record in records])
    every = [record for records in per_pipeline for record in records]
    assert len(every) == len(set(every)) == plan.examples
    assert "reads 2 shard(s), 1 record in 3" in plan.describe(_context(2, pipelines=3))


def test_training_dataset_batches_per_replica_under_an_input_context(shard_pattern):
    plan = input_pipeline.plan_pipeline("train", shard_pattern, SIZE, 2 * BATCH, 2**30, True)
    context = _context(1, pipelines=2, replicas=2)
    dataset = input_pipeline.training_dataset(plan, SIZE, NORMALIZATION, 40, 0, context)

    images, labels = next(iter(dataset))
    assert images.shape == (BATCH, SIZE, SIZE, 3) and labels.shape == (BATCH,)
    described = plan.describe(context)
    assert "input pipeline 2 of 2 reads 1 shard(s)" in described
    assert f"batches {BATCH} per replica for 2 replica(s)" in described


def test_training_runs_untuned_and_evaluation_tuned(shard_pattern):
    """Training has no tuning thread for its iterator's deletion to wait on (without_autotuning);
    evaluation keeps tf.data's tuning."""
    train_plan = input_pipeline.plan_pipeline("train", shard_pattern, SIZE, BATCH, 2**30, True)
    training = input_pipeline.training_dataset(train_plan, SIZE, NORMALIZATION, 40, 0)
    eval_plan = input_pipeline.plan_pipeline("eval", shard_pattern, SIZE, BATCH, 2**30, False)
    evaluation = input_pipeline.eval_dataset(eval_plan, SIZE, NORMALIZATION)

    assert training.options().autotune.enabled is False
    assert evaluation.options().autotune.enabled is not False
    assert "untuned" in train_plan.describe() and "untuned" not in eval_plan.describe()
    iterator = iter(training)
    for _ in range(3):
        images, _ = next(iterator)
        assert images.shape == (BATCH, SIZE, SIZE, 3)


# The soft-label stage: label smoothing, MixUp, CutMix on whole batches.

SOFT_BATCH = 6
CLASSES = len(LABEL_NAMES)
SEED = tf.constant([3, 4], tf.int64)


def _distinct_batch():
    """SOFT_BATCH images, each one constant value (its index), and labels 0, 1, 2, 0, 1, 2."""
    values = tf.range(SOFT_BATCH, dtype=tf.float32)[:, tf.newaxis, tf.newaxis, tf.newaxis]
    images = values * tf.ones([SOFT_BATCH, SIZE, SIZE, 3])
    labels = tf.range(SOFT_BATCH, dtype=tf.int64) % CLASSES
    return images, labels


def _soft(**switches):
    return input_pipeline.SoftLabels(CLASSES, **switches)


def test_label_smoothing_moves_mass_evenly_off_the_true_class():
    images, labels = _distinct_batch()
    mixed_images, targets = input_pipeline.soft_label_batch(
        images, labels, _soft(label_smoothing=0.3), SEED
    )
    expected = np.full((SOFT_BATCH, CLASSES), 0.1)
    expected[np.arange(SOFT_BATCH), labels.numpy()] = 0.8
    np.testing.assert_allclose(targets.numpy(), expected, rtol=1e-6)
    np.testing.assert_array_equal(mixed_images.numpy(), images.numpy())


@pytest.mark.parametrize("smoothing", [0.0, 0.1])
def test_mixup_blends_images_and_labels_by_the_same_convex_weight(smoothing):
    images, labels = _distinct_batch()
    mixed, targets = input_pipeline.soft_label_batch(
        images, labels, _soft(mixup_alpha=0.4, label_smoothing=smoothing), SEED
    )
    mixed, targets = mixed.numpy(), targets.numpy()
    np.testing.assert_allclose(targets.sum(axis=1), 1.0, rtol=1e-6)
    assert (targets >= 0).all()
    for row in range(SOFT_BATCH):
        partner = SOFT_BATCH - 1 - row  # the batch reversed
        # Image row is row * w + partner * (1 - w): w from the (constant) pixels.
        weight = (mixed[row, 0, 0, 0] - partner) / (row - partner)
        assert 0.0 <= weight <= 1.0
        np.testing.assert_allclose(mixed[row], mixed[row, 0, 0, 0], rtol=1e-6)
        one_hot = np.eye(CLASSES)[[labels[row], labels[partner]]]
        smoothed = one_hot * (1 - smoothing) + smoothing / CLASSES
        expected = weight * smoothed[0] + (1 - weight) * smoothed[1]
        np.testing.assert_allclose(targets[row], expected, rtol=1e-5, atol=1e-6)
    # Weights are drawn per image, not one for the batch.
    assert len(np.unique(np.round(mixed[:, 0, 0, 0], 4))) > 1


def test_cutmix_label_weight_is_the_pasted_area_fraction():
    images, labels = _distinct_batch()
    mixed, targets = input_pipeline.soft_label_batch(images, labels, _soft(cutmix_alpha=1.0), SEED)
    mixed, targets = mixed.numpy()[..., 0], targets.numpy()
    np.testing.assert_allclose(targets.sum(axis=1), 1.0, rtol=1e-6)
    pasted_somewhere = False
    for row in range(SOFT_BATCH):
        partner = SOFT_BATCH - 1 - row
        pasted = mixed[row] == partner
        assert ((mixed[row] == row) | pasted).all()  # every pixel is its own or its partner's
        fraction = pasted.mean()
        rows, columns = np.nonzero(pasted)
        if fraction:  # the pasted pixels form one box
            box = (rows.max() - rows.min() + 1) * (columns.max() - columns.min() + 1)
            assert box == pasted.sum()
            pasted_somewhere = True
        one_hot = np.eye(CLASSES)[[labels[row], labels[partner]]]
        expected = (1 - fraction) * one_hot[0] + fraction * one_hot[1]
        np.testing.assert_allclose(targets[row], expected, rtol=1e-5, atol=1e-6)
    assert pasted_somewhere


@pytest.mark.parametrize(
    "switches",
    [{"label_smoothing": 0.1}, {"mixup_alpha": 0.2}, {"cutmix_alpha": 1.0}],
    ids=["smoothing", "mixup", "cutmix"],
)
def test_soft_label_batch_eager_equals_map(switches):
    images, labels = _distinct_batch()

    def fn(images, labels):
        return input_pipeline.soft_label_batch(images, labels, _soft(**switches), SEED)

    eager_images, eager_targets = fn(images, labels)
    mapped = tf.data.Dataset.from_tensors((images, labels)).map(fn)
    mapped_images, mapped_targets = next(iter(mapped))

    np.testing.assert_allclose(eager_images.numpy(), mapped_images.numpy(), rtol=1e-6)
    np.testing.assert_allclose(eager_targets.numpy(), mapped_targets.numpy(), rtol=1e-6)


@pytest.mark.parametrize("budget", [2**30, 0], ids=["cached", "uncached"])
def test_soft_labels_are_static_float_targets_and_trace_once(shard_pattern, budget):
    plan = _plan(shard_pattern, budget=budget)
    dataset = input_pipeline.training_dataset(
        plan, SIZE, NORMALIZATION, 40, 0, soft_labels=_soft(cutmix_alpha=1.0)
    )
    images, targets = dataset.element_spec
    assert images.shape == (BATCH, SIZE, SIZE, 3)
    assert targets.shape == (BATCH, CLASSES) and targets.dtype == tf.float32

    @tf.function
    def step(images, targets):
        return tf.reduce_sum(images) + tf.reduce_sum(targets)

    mixed = 0
    for images, targets in dataset.take(3 * EXAMPLES // BATCH + 1):
        step(images, targets)
        np.testing.assert_allclose(targets.numpy().sum(axis=1), 1.0, rtol=1e-6)
        mixed += int((targets.numpy().max(axis=1) < 1.0).sum())
    assert step.experimental_get_tracing_count() == 1
    assert mixed  # some rows got a pasted box


def test_soft_labels_are_off_by_default_and_the_pipeline_keeps_int_labels(shard_pattern):
    assert input_pipeline.SoftLabels.of(TrainerConfig(), CLASSES) is None
    on = input_pipeline.SoftLabels.of(TrainerConfig(mixup_alpha=0.2), CLASSES)
    assert on == input_pipeline.SoftLabels(CLASSES, mixup_alpha=0.2)
    assert "MixUp alpha 0.2" in on.describe()

    plan = _plan(shard_pattern)
    default = input_pipeline.training_dataset(plan, SIZE, NORMALIZATION, 40, 0, soft_labels=None)
    plain = input_pipeline.training_dataset(plan, SIZE, NORMALIZATION, 40, 0)
    softened = input_pipeline.training_dataset(plan, SIZE, NORMALIZATION, 40, 0, soft_labels=on)
    assert default.element_spec == plain.element_spec
    assert default.element_spec[1] == tf.TensorSpec((BATCH,), tf.int64)
    # Off, not one op more: the same dataset graph as a pipeline that never had the stage.
    assert _dataset_ops(default) == _dataset_ops(plain) != _dataset_ops(softened)


def _dataset_ops(dataset: tf.data.Dataset) -> list[str]:
    graph = tf.compat.v1.GraphDef.FromString(dataset._as_serialized_graph().numpy())
    return sorted(node.op for node in graph.node)
