"""Checkpoints that let a killed training run resume: model weights and optimizer state (its step
counter, slots and loss scale) and the best validation so far, every N optimizer steps, written by
the training thread.

Under MultiWorkerMirroredStrategy every worker takes part in saving (reading synchronized
variables is a collective), but only the chief writes into the checkpoint directory; the others
write into a private temporary folder that is removed afterwards.
"""

from __future__ import annotations

import hashlib
import json
import logging
import shutil
import tempfile

import tensorflow as tf

KEEP = 2  # the newest checkpoint, and the one before it in case the newest is being written


class RunCheckpoints:
    """A CheckpointManager bound to one model and optimizer, with resume and clean-up."""

    def __init__(
        self,
        directory: str,
        model: tf.Module,
        optimizer: tf.Module,
        every_steps: int,
        strategy: tf.distribute.Strategy,
        best: tf.Module | None = None,
    ):
        """`best`: the run's best validation (best_validation.py), saved and restored with the
        model so a resumed run keeps it."""
        self.chief = strategy.extended.should_checkpoint
        self.directory = directory if self.chief else tempfile.mkdtemp(prefix="checkpoints-")
        tracked = {"best": best} if best is not None else {}
        self._checkpoint = tf.train.Checkpoint(model=model, optimizer=optimizer, **tracked)
        self._manager = tf.train.CheckpointManager(
            self._checkpoint,
            self.directory,
            max_to_keep=KEEP,
            step_counter=optimizer.iterations,
            checkpoint_interval=every_steps or None,
        )
        self._every_steps = every_steps
        # Not TensorFlow's async writes: their thread walks the Keras model's layers while training
        # goes on, and once failed the run on a layer it read half-set ('ReLU' object has no
        # attribute '_trainable'). The 'checkpoint' state file is updated only once a write is
        # complete, so a kill during a write leaves the previous checkpoint as the latest.
        self._options = tf.train.CheckpointOptions()
        self._source = directory

    def restore(self) -> int:
        """Restores the latest checkpoint of the (chief's) directory, if any; returns its step."""
        latest = tf.train.latest_checkpoint(self._source)
        if latest is None:
            return 0
        self._checkpoint.restore(latest).assert_existing_objects_matched()
        step = int(self._checkpoint.optimizer.iterations.numpy())
        logging.info("resumed from %s at optimizer step %d", latest, step)
        return step

    def maybe_save(self, step: int) -> None:
        """Saves when `step` is a multiple of every_steps (execution boundaries are aligned)."""
        if self._every_steps and step % self._every_steps == 0:
            self._manager.save(checkpoint_number=step, check_interval=False, options=self._options)

    def finish(self, delete: bool) -> None:
        """Waits for background writes; deletes the checkpoints once the run has succeeded (a
        re-run then trains afresh) and always a non-chief's private folder."""
        self._manager.sync()
        if delete and self.chief and tf.io.gfile.exists(self.directory):
            tf.io.gfile.rmtree(self.directory)
        if not self.chief:
            shutil.rmtree(self.directory, ignore_errors=True)


def stable_checkpoint_dir(root: str, inputs: dict) -> str:
    """root/<fingerprint of inputs>: the same folder for every execution with the same inputs,
    a new one as soon as anything that shapes the training changes."""
    digest = hashlib.sha256(json.dumps(inputs, sort_keys=True, default=str).encode()).hexdigest()
    return f"{root.rstrip('/')}/{digest[:16]}"
