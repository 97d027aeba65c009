"""The training schedule: which layers train and at what learning rate, phase by phase.

A run is one or two phases over a single optimizer, whose step counter says where a run is, so a
resumed run lands in the right phase (and learning rate) by itself:
  from scratch: one phase, every layer, learning_rate with warmup then cosine decay;
  fine-tuning (weights or weights_path): frozen_epochs with the backbone frozen (the head alone, at
    learning_rate with its warmup), then the rest of the epochs training the backbone's last
    unfreeze_layers layers (or all) with the head at the lower fine_tune_learning_rate;
  warm start (from the last blessed model): one phase of warm_start_epochs, every layer, at
    fine_tune_learning_rate: the model is trained already, so no warmup and no frozen phase.
Each phase of a run from a new head (from scratch, fine-tuning) lasts at least
config.min_phase_steps optimizer steps, in whole epochs: on a small training split its epochs
are stretched, as an epoch of 50 images is 1-3 steps and the optimizer needs steps, not passes,
to move the weights (the head of a 15-step frozen phase stays near chance); an explicit
trainer.epochs turns the stretching off (config.stretch_epochs). A warm start is exactly
warm_start_epochs: its model is trained already, and few steps are its point.
Changing which variables train makes the engine trace its step once more (once per phase).

Adam's bias correction counts the optimizer's steps since the run began, but a backbone unfrozen
after the frozen phase starts with zero moments: its updates would be those of Adam's step
thousands, not its first steps, up to several times the learning rate asked for (more, the
longer the frozen phase). The fine-tuning phase's learning rate carries the ratio of the two
corrections, so the backbone moves exactly as under an Adam started with the phase.
"""

from __future__ import annotations

import dataclasses
import math

import tensorflow as tf
import tf_keras as keras

from components.training.model import backbone_of
from components.training.trainer_config import TrainerConfig

# The run's Adam (train.py builds it with these): the schedule corrects for its bias correction.
ADAM_BETA_1 = 0.9
ADAM_BETA_2 = 0.999


@dataclasses.dataclass(frozen=True)
class Phase:
    """Optimizer steps [first_step, first_step + steps) of one phase."""

    name: str  # 'full', 'frozen', 'fine_tune' or 'warm_start'
    first_step: int
    steps: int
    learning_rate: float  # the peak, after warmup_steps of linear warmup; cosine decay to zero
    warmup_steps: int
    backbone_trainable: bool
    unfreeze_layers: int = 0  # of the backbone's last layers; 0: all (when it trains at all)

    @property
    def end_step(self) -> int:
        return self.first_step + self.steps


def plan_phases(config: TrainerConfig, steps_per_epoch: int, warm_start: bool) -> tuple[Phase, ...]:
    """The run's phases, in order; their steps add up to the run's optimizer steps."""

    def steps(epochs: int) -> int:
        """Optimizer steps of a phase of `epochs` epochs: whole epochs, at least min_phase_steps
        when the config stretches epochs."""
        if not config.stretch_epochs:
            return epochs * steps_per_epoch
        floor = math.ceil(config.min_phase_steps / steps_per_epoch)
        return max(epochs, floor) * steps_per_epoch

    warmup = config.warmup_epochs * steps_per_epoch
    if warm_start:
        return (
            Phase(
                "warm_start",
                0,
                config.warm_start_epochs * steps_per_epoch,
                config.fine_tune_learning_rate,
                0,
                True,
            ),
        )
    if not config.fine_tunes:
        return (Phase("full", 0, steps(config.epochs), config.learning_rate, warmup, True),)
    frozen = steps(config.frozen_epochs) if config.frozen_epochs else 0
    fine_tune = Phase(
        "fine_tune",
        frozen,
        steps(config.epochs - config.frozen_epochs),
        config.fine_tune_learning_rate,
        0 if frozen else warmup,
        True,
        config.unfreeze_layers,
    )
    if not frozen:
        return (fine_tune,)
    return (Phase("frozen", 0, frozen, config.learning_rate, warmup, False), fine_tune)


def phase_at(phases: tuple[Phase, ...], step: int) -> Phase:
    """The phase that optimizer step `step` (0-based) belongs to; the last one past the end."""
    return next((phase for phase in phases if step < phase.end_step), phases[-1])


def apply_phase(model: keras.Model, phase: Phase) -> None:
    """Sets which layers train: the head always; the backbone as the phase says. Batch
    normalization layers that train keep running in inference mode when the model was built
    for fine-tuning (build_model), so only their scale and offset move."""
    backbone = backbone_of(model)
    backbone.trainable = phase.backbone_trainable
    if phase.backbone_trainable and phase.unfreeze_layers:
        for layer in backbone.layers[: -phase.unfreeze_layers]:
            layer.trainable = False


@keras.saving.register_keras_serializable(package="imgpipe")
class PhasedSchedule(keras.optimizers.schedules.LearningRateSchedule):
    """Each phase's learning rate: linear warmup from zero to its peak, then cosine decay to
    zero at the phase's end (as keras' CosineDecay with warmup); in a phase that unfreezes the
    backbone, times the ratio that rebases Adam's bias correction to the phase's first step."""

    def __init__(self, phases: list[dict]):
        self.phases = [dict(phase) for phase in phases]

    @classmethod
    def of(cls, phases: tuple[Phase, ...]) -> PhasedSchedule:
        return cls([dataclasses.asdict(phase) for phase in phases])

    def __call__(self, step):
        step = tf.cast(step, tf.float32)
        rate = tf.constant(0.0)
        previous = None
        for phase in self.phases:  # in order: the last phase that has started wins
            local = step - phase["first_step"]
            warmup = float(phase["warmup_steps"])
            decay = float(max(phase["steps"] - phase["warmup_steps"], 1))
            peak = phase["learning_rate"]
            warming = peak * local / max(warmup, 1.0)
            progress = tf.clip_by_value((local - warmup) / decay, 0.0, 1.0)
            decaying = 0.5 * peak * (1.0 + tf.cos(math.pi * progress))
            value = tf.where(local < warmup, warming, decaying)
            if previous and phase["backbone_trainable"] and not previous["backbone_trainable"]:
                # The backbone's moments start at zero here. Adam counts its steps from 1, the
                # schedule sees the step before.
                first = tf.maximum(local, 0.0) + 1.0
                value *= _adam_step_size(first) / _adam_step_size(step + 1.0)
            rate = tf.where(local >= 0, value, rate)
            previous = phase
        return rate

    def get_config(self) -> dict:
        return {"phases": self.phases}


def _adam_step_size(step):
    """Adam's step size per unit of learning rate at its (1-based) step `step`: its bias
    corrections, sqrt(1 - beta_2^step) / (1 - beta_1^step)."""
    return tf.sqrt(1.0 - ADAM_BETA_2**step) / (1.0 - ADAM_BETA_1**step)
