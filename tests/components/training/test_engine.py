"""The training step: one trace for any number of calls, gradient accumulation equal to one big
batch, loss scaling under mixed_float16, input wait measured inside the graph; evaluation over
every example."""

import json
import subprocess
import sys

import numpy as np
import pytest
import tensorflow as tf
import tf_keras as keras

from components.training.engine import TrainingEngine

BATCH = 8
CLASSES = 3


def _model_without_batch_norm(seed: int = 0, dtype_policy: str = "float32") -> keras.Model:
    keras.utils.set_random_seed(seed)
    previous = keras.mixed_precision.global_policy()
    keras.mixed_precision.set_global_policy(dtype_policy)
    try:
        inputs = keras.Input((8, 8, 3))
        x = keras.layers.Conv2D(4, 3, activation="relu")(inputs)
        x = keras.layers.GlobalAveragePooling2D()(x)
        outputs = keras.layers.Dense(CLASSES, activation="softmax", dtype="float32")(x)
        return keras.Model(inputs, outputs)
    finally:
        keras.mixed_precision.set_global_policy(previous)


def _model_with_batch_norm(seed: int = 0) -> keras.Model:
    keras.utils.set_random_seed(seed)
    inputs = keras.Input((8, 8, 3))
    x = keras.layers.Conv2D(4, 3)(inputs)
    x = keras.layers.BatchNormalization()(x)
    x = keras.layers.GlobalAveragePooling2D()(keras.layers.ReLU()(x))
    return keras.Model(inputs, keras.layers.Dense(CLASSES, activation="softmax")(x))


def _batches(count: int, batch: int = BATCH) -> tf.data.Dataset:
    rng = np.random.default_rng(1)
    images = rng.normal(size=(count * batch, 8, 8, 3)).astype(np.float32)
    labels = rng.integers(0, CLASSES, count * batch)
    return tf.data.Dataset.from_tensor_slices((images, labels)).batch(batch, drop_remainder=True)


def _engine(accumulation=1, graph=True, policy="float32", optimizer=None, jit_compile=False):
    strategy = tf.distribute.MirroredStrategy(["/cpu:0"])
    with strategy.scope():
        model = _model_without_batch_norm(dtype_policy=policy)
        optimizer = optimizer or keras.optimizers.SGD(0.5)
        if policy == "mixed_float16":
            optimizer = keras.mixed_precision.LossScaleOptimizer(optimizer)
        optimizer.build(model.trainable_variables)
        engine = TrainingEngine(model, optimizer, strategy, accumulation, jit_compile, graph)
    return engine, strategy


def _train(engine, strategy, dataset, calls):
    iterator = iter(strategy.experimental_distribute_dataset(dataset))
    return [float(engine.run(iterator, steps)) for steps in calls]


def test_one_trace_for_calls_of_any_length():
    engine, strategy = _engine()
    losses = _train(engine, strategy, _batches(6).repeat(), calls=[3, 2, 1])  # short last call

    assert engine.traces == 1
    assert int(engine.optimizer.iterations.numpy()) == 6
    assert all(np.isfinite(losses))


def _examples(count: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(2)
    return rng.normal(size=(count, 8, 8, 3)).astype(np.float32), rng.integers(0, CLASSES, count)


def _scores(model: keras.Model, images: np.ndarray, labels: np.ndarray) -> tuple[float, float]:
    """Mean cross-entropy and accuracy computed eagerly from the model's probabilities."""
    probabilities = model(images, training=False).numpy()
    picked = np.clip(probabilities[np.arange(len(labels)), labels], 1e-7, 1.0)
    return float(-np.log(picked).mean()), float((probabilities.argmax(axis=1) == labels).mean())


@pytest.mark.parametrize("graph", [True, False])
def test_evaluate_scores_every_example_once_partial_last_batch_included(graph):
    engine, strategy = _engine(graph=graph)
    _train(engine, strategy, _batches(2), calls=[2])
    images, labels = _examples(2 * BATCH + 3)
    dataset = tf.data.Dataset.from_tensor_slices((images, labels)).batch(BATCH)

    first = engine.evaluate(dataset)
    again = engine.evaluate(dataset)  # metrics start from zero at each call

    loss, accuracy = _scores(engine.model, images, labels)
    assert first == again
    assert first["examples"] == 2 * BATCH + 3
    assert first["loss"] == pytest.approx(loss, rel=1e-5)
    assert first["accuracy"] == pytest.approx(accuracy)
    assert engine.traces == (1 if graph else 0)  # evaluating is not the training loop


@pytest.mark.parametrize("jit_compile", [False, True])
def test_accumulated_micro_batches_equal_one_big_batch(jit_compile):
    """4 micro-batches of 2 per optimizer step against one batch of 8: the same update, with the
    gradients compiled by XLA too."""
    big, strategy = _engine(accumulation=1)
    accumulated, strategy_b = _engine(accumulation=4, jit_compile=jit_compile)
    big_losses = _train(big, strategy, _batches(3), calls=[3])
    accumulated_losses = _train(accumulated, strategy_b, _batches(3), calls=[3])

    assert int(accumulated.optimizer.iterations.numpy()) == 3
    np.testing.assert_allclose(accumulated_losses, big_losses, rtol=1e-5)
    for a, b in zip(
        accumulated.model.trainable_variables, big.model.trainable_variables, strict=True
    ):
        np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-5, atol=1e-6)
    assert accumulated.loss.count.numpy() == big.loss.count.numpy() == 3 * BATCH


def test_eager_and_graph_steps_agree():
    graph, strategy = _engine()
    eager, strategy_b = _engine(graph=False)
    np.testing.assert_allclose(
        _train(eager, strategy_b, _batches(2), calls=[2]),
        _train(graph, strategy, _batches(2), calls=[2]),
        rtol=1e-5,
    )
    assert eager.traces == 0


def test_mixed_float16_scales_the_loss_and_keeps_float32_outputs():
    engine, strategy = _engine(policy="mixed_float16")
    losses = _train(engine, strategy, _batches(2), calls=[2])

    assert np.all(np.isfinite(losses))
    assert engine.model.layers[1].compute_dtype == "float16"
    assert engine.model.output.dtype == tf.float32
    assert engine.model.trainable_variables[0].dtype == tf.float32  # float32 master weights
    assert int(engine.optimizer.iterations.numpy()) == 2


def _one_hot(dataset: tf.data.Dataset) -> tf.data.Dataset:
    return dataset.map(lambda images, labels: (images, tf.one_hot(labels, CLASSES)))


@pytest.mark.parametrize("accumulation", [1, 4])
def test_one_hot_soft_labels_train_exactly_like_int_labels(accumulation):
    """Soft targets [batch, classes] take the categorical loss: one-hot targets give the int
    labels' losses, weights and accuracy, with micro-batches too, in one trace."""
    sparse, strategy = _engine(accumulation)
    soft, strategy_b = _engine(accumulation)
    sparse_losses = _train(sparse, strategy, _batches(3), calls=[3])
    soft_losses = _train(soft, strategy_b, _one_hot(_batches(3)), calls=[3])

    assert soft.traces == 1
    np.testing.assert_allclose(soft_losses, sparse_losses, rtol=1e-5)
    for a, b in zip(soft.model.trainable_variables, sparse.model.trainable_variables, strict=True):
        np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-5, atol=1e-6)
    assert soft.accuracy.result().numpy() == sparse.accuracy.result().numpy()


def test_soft_labels_change_the_loss_and_train_under_mixed_float16():
    smoothed = _one_hot(_batches(2)).map(lambda x, y: (x, y * 0.7 + 0.1))
    engine, strategy = _engine(policy="mixed_float16")
    plain, strategy_b = _engine()
    soft_losses = _train(engine, strategy, smoothed, calls=[2])
    sparse_losses = _train(plain, strategy_b, _batches(2), calls=[2])

    assert np.all(np.isfinite(soft_losses)) and engine.traces == 1
    assert abs(soft_losses[0] - sparse_losses[0]) > 1e-3


SLOW_BATCH_SECONDS = 0.1


def test_input_wait_is_measured():
    """Eight batches that each take far longer to make than a step of this tiny model: the
    prefetch ahead of the step can hide a few of them (five allowed for), never all."""
    slow = _batches(8).map(lambda x, y: (tf.py_function(_sleep, [x], tf.float32), y))
    slow = slow.map(lambda x, y: (tf.ensure_shape(x, [BATCH, 8, 8, 3]), y))
    engine, strategy = _engine()
    _train(engine, strategy, slow, calls=[8])
    assert engine.input_wait_seconds.numpy() >= 3 * SLOW_BATCH_SECONDS


def _sleep(x):
    import time

    time.sleep(SLOW_BATCH_SECONDS)
    return x


def test_a_batch_that_does_not_split_into_micro_batches_is_refused():
    engine, strategy = _engine(accumulation=3)
    with pytest.raises(ValueError, match="batch of 8 does not split into 3 equal micro-batches"):
        _train(engine, strategy, _batches(1), calls=[1])


_ONE_VS_TWO_REPLICAS = """
import json
import components
import tensorflow as tf
cpu = tf.config.list_physical_devices("CPU")[0]
tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * 2)
from tests.components.training import test_engine as t
results = {}
for devices in (["/cpu:0"], ["/cpu:0", "/cpu:1"]):
    strategy = tf.distribute.MirroredStrategy(devices)
    with strategy.scope():
        model = t._model_without_batch_norm()
        optimizer = t.keras.optimizers.SGD(0.5)
        optimizer.build(model.trainable_variables)
        engine = t.TrainingEngine(model, optimizer, strategy)
    losses = t._train(engine, strategy, t._batches(3), calls=[3])
    weights = [w.numpy().tolist() for w in model.trainable_variables]
    # The last batch of 1 leaves the second replica without examples.
    images, labels = t._examples(2 * t.BATCH + 1)
    dataset = tf.data.Dataset.from_tensor_slices((images, labels)).batch(t.BATCH)
    evaluation = engine.evaluate(dataset)
    results[len(devices)] = {"replicas": strategy.num_replicas_in_sync, "losses": losses,
                             "weights": weights, "traces": engine.traces,
                             "evaluation": evaluation, "expected": t._scores(model, images, labels)}
# Each replica keeps batch-norm statistics of its half; the model read outside the replicas (as
# the export reads it) has their mean.
with strategy.scope():
    model = t._model_with_batch_norm()
    optimizer = t.keras.optimizers.SGD(0.5)
    optimizer.build(model.trainable_variables)
    engine = t.TrainingEngine(model, optimizer, strategy)
t._train(engine, strategy, t._batches(3), calls=[3])
results["batch_norm"] = {"evaluation": engine.evaluate(dataset),
                         "expected": t._scores(model, images, labels)}
print("RESULTS" + json.dumps(results))
"""


@pytest.mark.slow
def test_two_replicas_train_like_one_on_the_same_global_batch():
    """Two logical CPUs (fixed when TensorFlow starts, so in a child), each taking half of every
    batch of 8: the same losses and weights as one replica taking all of it."""
    result = subprocess.run(
        [sys.executable, "-c", _ONE_VS_TWO_REPLICAS],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    one, two, batch_norm = json.loads(result.stdout.split("RESULTS")[-1]).values()

    assert (one["replicas"], two["replicas"]) == (1, 2)
    assert one["traces"] == two["traces"] == 1
    np.testing.assert_allclose(two["losses"], one["losses"], rtol=1e-5)
    for a, b in zip(two["weights"], one["weights"], strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-6)
    # Evaluation on two replicas, one of them idle in the partial last batch, scores like one.
    assert two["evaluation"]["examples"] == one["evaluation"]["examples"] == 2 * BATCH + 1
    assert two["evaluation"]["loss"] == pytest.approx(two["expected"][0], rel=1e-5)
    assert two["evaluation"]["accuracy"] == pytest.approx(two["expected"][1])
    assert two["evaluation"]["loss"] == pytest.approx(one["evaluation"]["loss"], rel=1e-4)
    # With batch norm, two replicas evaluate the model as it is exported: the mean statistics.
    assert batch_norm["evaluation"]["loss"] == pytest.approx(batch_norm["expected"][0], rel=1e-5)
    assert batch_norm["evaluation"]["accuracy"] == pytest.approx(batch_norm["expected"][1])
