"""Warm start: a new run begins from an earlier exported model's weights (TFX's base_model, the
last blessed model), so a new span costs a few epochs instead of the full schedule.

Only a model with the same classes, in the same label-id order, can be continued: its head's
outputs mean those classes. A changed class set is a decision for the user (train from scratch,
or keep the old classes), never a silent re-mapping, so it fails the run with both lists.
"""

from __future__ import annotations

import logging
import os

import tf_keras as keras

from components.training.serving_assets import read_label_names


class ClassSetChangedError(ValueError):
    """The base model was trained on other classes than this run's."""


def check_class_set(base_model_dir: str, label_names: list[str]) -> None:
    base_names = read_label_names(base_model_dir)
    if list(base_names) != list(label_names):
        raise ClassSetChangedError(
            f"cannot warm-start from {base_model_dir}: it was trained on the classes "
            f"{base_names}, this run has {list(label_names)}; train from scratch with "
            "trainer.warm_start=false"
        )


def load_base_weights(model: keras.Model, base_model_dir: str, label_names: list[str]) -> None:
    """Sets `model`'s weights to those of the SavedModel at base_model_dir (exported by
    export_model from a model of the same architecture), after checking the class set.

    The weights go through a clone: restoring into `model` itself would also queue the old run's
    optimizer state (step counter, slots) for the optimizer it gets later, and the new run has
    its own schedule from step 0."""
    check_class_set(base_model_dir, label_names)
    source = keras.models.clone_model(model)
    status = source.load_weights(os.path.join(base_model_dir, "variables", "variables"))
    status.expect_partial()  # the SavedModel also holds the old optimizer and signatures
    status.assert_existing_objects_matched()
    model.set_weights(source.get_weights())
    logging.info("warm start from %s", base_model_dir)
