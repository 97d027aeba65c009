"""Warm start loads an exported model's weights into a fresh model of the same classes, and
refuses a model trained on another class set."""

import numpy as np
import pytest
import tf_keras as keras

from components.training import export
from components.training.model import build_model
from components.training.preprocessing import Normalization
from components.training.trainer_config import runlocal
from components.training.warm_start import ClassSetChangedError, load_base_weights

pytestmark = pytest.mark.slow  # every test loads a SavedModel the module fixture exports
LABEL_NAMES = ["cat", "dog", "emu"]
NORMALIZATION = Normalization((120.0, 110.0, 100.0), (60.0, 50.0, 40.0))


@pytest.fixture(scope="module")
def base_model(tmp_path_factory):
    """An exported model, compiled with an optimizer as train() exports it."""
    config = runlocal()
    keras.utils.set_random_seed(1)
    model = build_model(config, len(LABEL_NAMES))
    optimizer = keras.optimizers.Adam(0.01)
    optimizer.build(model.trainable_variables)
    optimizer.iterations.assign(7)
    model.compile(optimizer=optimizer, loss="sparse_categorical_crossentropy")
    path = str(tmp_path_factory.mktemp("base") / "model")
    export.export_model(model, path, config.image_size, LABEL_NAMES, NORMALIZATION)
    return model, path


def test_every_weight_of_the_base_model_is_loaded(base_model):
    source, path = base_model
    keras.utils.set_random_seed(2)
    model = build_model(runlocal(), len(LABEL_NAMES))
    assert not np.array_equal(model.get_weights()[0], source.get_weights()[0])

    load_base_weights(model, path, LABEL_NAMES)

    for expected, actual in zip(source.get_weights(), model.get_weights(), strict=True):
        np.testing.assert_array_equal(expected, actual)  # batch-norm statistics included


@pytest.mark.parametrize(
    "names", [["cat", "dog"], ["cat", "dog", "emu", "fox"], ["dog", "cat", "emu"]]
)
def test_a_changed_class_set_is_refused_naming_both(base_model, names):
    _, path = base_model
    model = build_model(runlocal(), len(names))
    with pytest.raises(ClassSetChangedError, match=r"\['cat', 'dog', 'emu'\].*this run has"):
        load_base_weights(model, path, names)
