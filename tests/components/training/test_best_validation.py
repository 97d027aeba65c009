"""The best validation: what counts as better, how many validations went by since, and its
weights kept and given back, also across a checkpoint."""

import numpy as np
import tensorflow as tf
import tf_keras as keras

from components.training.best_validation import BestValidation
from components.training.checkpoints import RunCheckpoints
from components.training.trainer_config import EarlyStoppingConfig


def _model():
    inputs = keras.Input((4,))
    return keras.Model(inputs, keras.layers.Dense(2)(inputs))


def _shift(model, amount):
    for variable in model.weights:
        variable.assign_add(tf.fill(variable.shape, amount))


def test_better_means_beyond_min_delta_in_the_metric_direction():
    model = _model()
    accuracy = BestValidation(model, EarlyStoppingConfig(metric="accuracy", min_delta=0.1), False)
    assert accuracy.best_step is None and accuracy.improves(0.0)  # the first always counts
    assert accuracy.offer(3, {"accuracy": 0.5, "loss": 1.0}, model)
    assert not accuracy.offer(6, {"accuracy": 0.55, "loss": 0.1}, model)  # within min_delta
    assert accuracy.offer(9, {"accuracy": 0.65, "loss": 2.0}, model)
    assert accuracy.best_step == 9

    loss = BestValidation(model, EarlyStoppingConfig(metric="loss"), False)
    assert loss.offer(3, {"accuracy": 0.5, "loss": 1.0}, model)
    assert not loss.offer(6, {"accuracy": 0.9, "loss": 1.0}, model)  # equal is no better
    assert loss.offer(9, {"accuracy": 0.1, "loss": 0.9}, model)


def test_stale_validations_count_from_the_best_one():
    model = _model()
    best = BestValidation(model, EarlyStoppingConfig(), False)
    assert best.stale_validations(30, 10) == 0  # none yet
    best.offer(20, {"accuracy": 0.5}, model)
    assert [best.stale_validations(step, 10) for step in (20, 30, 40)] == [0, 1, 2]


def test_the_best_weights_survive_a_checkpoint_and_go_back_into_the_model(tmp_path):
    strategy = tf.distribute.get_strategy()
    model = _model()
    optimizer = keras.optimizers.Adam(0.1)
    optimizer.build(model.trainable_variables)
    best = BestValidation(model, EarlyStoppingConfig(), keep_weights=True)
    kept = [variable.numpy() for variable in model.weights]
    best.offer(2, {"accuracy": 0.7}, model)
    _shift(model, 1.0)  # trained on, and worse
    best.offer(4, {"accuracy": 0.6}, model)
    checkpoints = RunCheckpoints(str(tmp_path), model, optimizer, 4, strategy, best)
    checkpoints.maybe_save(4)
    checkpoints.finish(delete=False)

    resumed_model = _model()
    resumed = BestValidation(resumed_model, EarlyStoppingConfig(), keep_weights=True)
    resumed_optimizer = keras.optimizers.Adam(0.1)
    resumed_optimizer.build(resumed_model.trainable_variables)
    RunCheckpoints(str(tmp_path), resumed_model, resumed_optimizer, 4, strategy, resumed).restore()
    assert resumed.best_step == 2 and float(resumed.value.numpy()) == 0.7
    resumed.restore_weights(resumed_model)
    for expected, variable in zip(kept, resumed_model.weights, strict=True):
        np.testing.assert_array_equal(expected, variable.numpy())
