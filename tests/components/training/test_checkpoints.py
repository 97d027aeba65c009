"""A checkpoint restores the model and the optimizer's state (step counter and slots); the
checkpoint folder is stable for the same inputs and new for any change."""

import numpy as np
import tensorflow as tf
import tf_keras as keras

from components.training.checkpoints import RunCheckpoints, stable_checkpoint_dir


def _model_and_adam():
    inputs = keras.Input((4,))
    model = keras.Model(inputs, keras.layers.Dense(2)(inputs))
    optimizer = keras.optimizers.Adam(0.1)
    optimizer.build(model.trainable_variables)
    return model, optimizer


def _train_steps(model, optimizer, steps):
    for _ in range(steps):
        with tf.GradientTape() as tape:
            loss = tf.reduce_sum(model(tf.ones([3, 4])) ** 2)
        gradients = tape.gradient(loss, model.trainable_variables)
        optimizer.apply_gradients(zip(gradients, model.trainable_variables, strict=True))


def test_restore_brings_back_weights_step_and_optimizer_slots(tmp_path):
    strategy = tf.distribute.get_strategy()
    model, optimizer = _model_and_adam()
    saved = RunCheckpoints(str(tmp_path), model, optimizer, every_steps=2, strategy=strategy)
    assert saved.restore() == 0  # nothing to resume yet
    _train_steps(model, optimizer, 3)
    saved.maybe_save(3)  # not a multiple of 2: no checkpoint
    _train_steps(model, optimizer, 1)
    saved.maybe_save(4)
    saved.finish(delete=False)  # waits for the background write

    fresh_model, fresh_optimizer = _model_and_adam()
    resumed = RunCheckpoints(str(tmp_path), fresh_model, fresh_optimizer, 2, strategy)
    assert resumed.restore() == 4
    for fresh, trained in zip(fresh_optimizer.variables, optimizer.variables, strict=True):
        np.testing.assert_array_equal(fresh.numpy(), trained.numpy())  # iterations, m, v
    for fresh, trained in zip(fresh_model.weights, model.weights, strict=True):
        np.testing.assert_array_equal(fresh.numpy(), trained.numpy())

    resumed.finish(delete=True)
    assert not tmp_path.exists()


def test_stable_dir_changes_exactly_with_its_inputs():
    inputs = {"config": {"epochs": 3}, "files": ["a", "b"]}
    same = stable_checkpoint_dir("root/checkpoints", dict(inputs))
    assert same == stable_checkpoint_dir("root/checkpoints", inputs)
    assert same.startswith("root/checkpoints/")
    assert same != stable_checkpoint_dir("root/checkpoints", {**inputs, "files": ["a"]})
    assert same != stable_checkpoint_dir("root/checkpoints", {**inputs, "config": {"epochs": 4}})
