"""Fine-tuning's two phases: the frozen phase trains the head alone, the fine-tuning phase only the
unfrozen layers (batch normalization statistics untouched), each phase in one traced graph, and
the learning rate follows each phase's own warmup and decay."""

import dataclasses

import numpy as np
import pytest
import tensorflow as tf
import tf_keras as keras

from components.training.engine import TrainingEngine
from components.training.model import backbone_of, build_model
from components.training.preprocessing import Normalization
from components.training.schedule import PhasedSchedule, apply_phase, phase_at, plan_phases
from components.training.trainer_config import runlocal

CLASSES = 3
NORMALIZATION = Normalization((100.0, 110.0, 120.0), (50.0, 55.0, 60.0))
UNFROZEN = 4  # the small_cnn backbone's last layers: conv, batch norm, ReLU, pooling


@pytest.fixture
def weights_file(tmp_path):
    config = runlocal()
    path = str(tmp_path / "backbone.h5")
    backbone_of(build_model(config, CLASSES)).save_weights(path)
    return path


def _fine_tuning(weights_file, **changes):
    values = {"epochs": 4, "frozen_epochs": 2, "weights_path": weights_file, **changes}
    return dataclasses.replace(runlocal(), **values)


def test_phases_of_each_kind_of_run(weights_file):
    scratch = plan_phases(dataclasses.replace(runlocal(), epochs=4, warmup_epochs=1), 10, False)
    assert [(p.name, p.first_step, p.steps, p.warmup_steps) for p in scratch] == [
        ("full", 0, 40, 10)
    ]
    config = _fine_tuning(weights_file, warmup_epochs=1, unfreeze_layers=UNFROZEN)
    frozen, fine_tune = plan_phases(config, 10, False)
    assert (frozen.name, frozen.steps, frozen.backbone_trainable) == ("frozen", 20, False)
    assert frozen.learning_rate == config.learning_rate and frozen.warmup_steps == 10
    assert (fine_tune.first_step, fine_tune.steps, fine_tune.warmup_steps) == (20, 20, 0)
    assert fine_tune.learning_rate == config.fine_tune_learning_rate
    assert fine_tune.unfreeze_layers == UNFROZEN
    (no_frozen,) = plan_phases(dataclasses.replace(config, frozen_epochs=0), 10, False)
    assert (no_frozen.name, no_frozen.steps, no_frozen.warmup_steps) == ("fine_tune", 40, 10)
    (warm,) = plan_phases(dataclasses.replace(config, warm_start_epochs=2), 10, True)
    assert (warm.name, warm.steps, warm.warmup_steps, warm.backbone_trainable) == (
        "warm_start",
        20,
        0,
        True,
    )
    assert phase_at((frozen, fine_tune), 19) is frozen
    assert phase_at((frozen, fine_tune), 20) is fine_tune


def test_every_phase_trains_at_least_min_phase_steps_in_whole_epochs(weights_file):
    """50 images in batches of 16 are 3 steps per epoch: 5 frozen epochs would be 15 steps."""
    config = _fine_tuning(
        weights_file, epochs=20, frozen_epochs=5, warmup_epochs=2, min_phase_steps=100
    )
    frozen, fine_tune = plan_phases(config, 3, False)
    assert (frozen.steps, frozen.warmup_steps) == (102, 6)  # 34 whole epochs
    assert (fine_tune.first_step, fine_tune.steps) == (102, 102)
    (full,) = plan_phases(dataclasses.replace(config, weights_path=None), 3, False)
    (no_frozen,) = plan_phases(dataclasses.replace(config, frozen_epochs=0), 3, False)
    assert (full.steps, no_frozen.steps) == (102, 102)
    # Where the epochs already give the steps, the phases are exactly their epochs.
    frozen, fine_tune = plan_phases(config, 50, False)
    assert (frozen.steps, fine_tune.steps) == (250, 750)
    # A warm start continues a trained model: exactly its epochs, however few steps they are.
    (warm,) = plan_phases(config, 3, True)
    assert warm.steps == config.warm_start_epochs * 3


def test_learning_rate_warms_up_and_decays_within_each_phase(weights_file):
    config = _fine_tuning(weights_file, warmup_epochs=1, learning_rate=0.01)
    schedule = PhasedSchedule.of(plan_phases(config, 10, False))
    rates = [float(schedule(step)) for step in (0, 5, 10, 19, 20, 30, 40)]
    np.testing.assert_allclose(rates[:3], [0.0, 0.005, 0.01], rtol=1e-6)
    assert 0 < rates[3] < 0.001  # the frozen phase's cosine nearly at its end
    # The fine-tuning phase's rates carry Adam's bias correction rebased to its first step.
    rebased = [_adam_rebasing(step, 20) for step in (20, 30)]
    np.testing.assert_allclose(rates[4] / rebased[0], config.fine_tune_learning_rate, rtol=1e-5)
    np.testing.assert_allclose(rates[5] / rebased[1], config.fine_tune_learning_rate / 2, rtol=1e-5)
    assert rates[6] == pytest.approx(0.0, abs=1e-9)
    rebuilt = PhasedSchedule.from_config(schedule.get_config())
    assert float(rebuilt(25)) == pytest.approx(float(schedule(25)))


def _adam_rebasing(step: int, first_step: int) -> float:
    """Adam's step size at its step counted from first_step, over the one it uses (counted from
    the run's start); its steps count from 1, the schedule's from 0."""

    def size(n):
        return np.sqrt(1 - 0.999**n) / (1 - 0.9**n)

    return size(step - first_step + 1) / size(step + 1)


def test_first_fine_tuning_step_moves_each_backbone_weight_by_the_learning_rate(weights_file):
    """Adam's first step moves every weight by the learning rate (whatever its gradient's size).
    A backbone unfrozen after a long frozen phase starts with zero moments, and must move as
    in Adam's first step, not by the run's step count's bias correction (2.5x more after 1,000
    frozen steps)."""
    config = _fine_tuning(weights_file, fine_tune_learning_rate=1e-3, min_phase_steps=1000)
    frozen, fine_tune = phases = plan_phases(config, 10, False)
    assert fine_tune.first_step == 1000 and fine_tune.warmup_steps == 0
    strategy = tf.distribute.MirroredStrategy(["/cpu:0"])
    with strategy.scope():
        model = build_model(config, CLASSES, NORMALIZATION)
        optimizer = keras.optimizers.Adam(PhasedSchedule.of(phases))
        optimizer.build(model.trainable_variables)
        engine = TrainingEngine(model, optimizer, strategy)
    optimizer.iterations.assign(frozen.steps)  # the frozen phase's steps left the backbone's
    rng = np.random.default_rng(0)  # moments at zero
    images = rng.normal(size=(4, config.image_size, config.image_size, 3)).astype(np.float32)
    labels = rng.integers(0, CLASSES, 4)
    dataset = tf.data.Dataset.from_tensor_slices((images, labels)).batch(4, drop_remainder=True)
    iterator = iter(strategy.experimental_distribute_dataset(dataset.repeat()))
    backbone = backbone_of(model)
    before = [variable.numpy() for variable in backbone.trainable_variables]

    apply_phase(model, fine_tune)
    engine.run(iterator, 1)
    moves = np.concatenate(
        [
            np.abs(variable.numpy() - old).ravel()
            for variable, old in zip(backbone.trainable_variables, before, strict=True)
        ]
    )
    assert moves.max() <= 1e-3 * 1.001
    assert np.median(moves) > 0.9e-3  # the smallest gradients are near Adam's epsilon


def _snapshot(layers) -> list[list[np.ndarray]]:
    return [[w.copy() for w in layer.get_weights()] for layer in layers]


def _changed(before, after) -> list[bool]:
    return [
        any(not np.array_equal(b, a) for b, a in zip(old, new, strict=True))
        for old, new in zip(before, after, strict=True)
    ]


def test_frozen_phase_trains_the_head_and_fine_tuning_only_the_unfrozen_layers(weights_file):
    config = _fine_tuning(weights_file, unfreeze_layers=UNFROZEN)
    strategy = tf.distribute.MirroredStrategy(["/cpu:0"])
    with strategy.scope():
        model = build_model(config, CLASSES, NORMALIZATION)
        optimizer = keras.optimizers.Adam(0.01)
        optimizer.build(model.trainable_variables)
        engine = TrainingEngine(model, optimizer, strategy)
    rng = np.random.default_rng(0)
    images = rng.normal(size=(16, config.image_size, config.image_size, 3)).astype(np.float32)
    labels = rng.integers(0, CLASSES, 16)
    dataset = tf.data.Dataset.from_tensor_slices((images, labels)).batch(4, drop_remainder=True)
    iterator = iter(strategy.experimental_distribute_dataset(dataset.repeat()))
    backbone, head = backbone_of(model), model.get_layer("probabilities")
    frozen, fine_tune = plan_phases(config, 2, False)

    before = _snapshot(backbone.layers)
    head_before = head.get_weights()[0].copy()
    apply_phase(model, frozen)
    engine.run(iterator, 2)
    engine.run(iterator, 1)
    assert not any(_changed(before, _snapshot(backbone.layers)))
    assert not np.array_equal(head_before, head.get_weights()[0])

    apply_phase(model, fine_tune)
    engine.run(iterator, 2)
    engine.run(iterator, 1)
    changed = _changed(before, _snapshot(backbone.layers))
    with_weights = [bool(layer.weights) for layer in backbone.layers]
    top = len(backbone.layers) - UNFROZEN
    assert not any(changed[:top])
    assert all(changed[top:][i] for i in range(UNFROZEN) if with_weights[top + i])
    # Batch normalization stays in inference mode: its moving statistics keep their values.
    (batch_norm,) = [
        layer
        for layer in backbone.layers[top:]
        if isinstance(layer, keras.layers.BatchNormalization)
    ]
    index = backbone.layers.index(batch_norm)
    np.testing.assert_array_equal(before[index][2], batch_norm.moving_mean.numpy())
    np.testing.assert_array_equal(before[index][3], batch_norm.moving_variance.numpy())
    assert engine.graphs == 2 and engine.traces == 2  # one trace per phase, over 4 calls
