"""The best validation of a run so far, for early stopping and for exporting the best weights.

Its step, its figure and (with restore_best) a copy of the model's weights are variables of a
tf.Module that the run's checkpoint saves beside the model and optimizer, so a killed run resumes
with them as they were at its checkpoint: the best weights survive a resume, and the count of
validations without improvement is derived from the step, not kept apart from it.
"""

from __future__ import annotations

import tensorflow as tf
import tf_keras as keras

from components.training.trainer_config import EarlyStoppingConfig


class BestValidation(tf.Module):
    """Create it inside the strategy's scope, after the model is built; `keep_weights` keeps a
    copy of the best validation's weights (restore_best)."""

    def __init__(self, model: keras.Model, stopping: EarlyStoppingConfig, keep_weights: bool):
        super().__init__(name="best_validation")
        self._stopping = stopping
        self.step = tf.Variable(-1, dtype=tf.int64, trainable=False, name="step")
        self.value = tf.Variable(0.0, dtype=tf.float64, trainable=False, name="value")
        # A variable per model variable, synchronized variables (batch normalization's moving
        # statistics) read as their mean across replicas.
        variables = model.weights if keep_weights else []
        self.copies = [
            tf.Variable(variable.read_value(), trainable=False, name="weight")
            for variable in variables
        ]

    @property
    def best_step(self) -> int | None:
        """The optimizer step of the best validation; None before the first."""
        step = int(self.step.numpy())
        return None if step < 0 else step

    def improves(self, value: float) -> bool:
        """Whether `value` of the stopping metric beats the best by more than min_delta."""
        if self.best_step is None:
            return True
        best, delta = float(self.value.numpy()), self._stopping.min_delta
        if self._stopping.metric == "loss":
            return value < best - delta
        return value > best + delta

    def offer(self, step: int, figures: dict[str, float], model: keras.Model) -> bool:
        """Keeps this validation (and the model's weights) when it is the best so far; every
        worker calls it at the same step (reading synchronized variables is a collective)."""
        value = figures[self._stopping.metric]
        if not self.improves(value):
            return False
        self.step.assign(step)
        self.value.assign(value)
        if self.copies:
            for copy, variable in zip(self.copies, model.weights, strict=True):
                copy.assign(variable.read_value())
        return True

    def stale_validations(self, step: int, every_steps: int) -> int:
        """Validations since the best one, when validations come every `every_steps` steps."""
        best = self.best_step
        return 0 if best is None else step // every_steps - best // every_steps

    def restore_weights(self, model: keras.Model) -> None:
        """Puts the best validation's weights back into the model it was made for."""
        if not self.copies:
            raise ValueError("the best weights were not kept (restore_best is off)")
        for copy, variable in zip(self.copies, model.weights, strict=True):
            variable.assign(copy.read_value())
