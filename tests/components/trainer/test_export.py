"""Both serving signatures run the training preprocessing and agree with each other."""

import hashlib

import numpy as np
import pytest
import tensorflow as tf

from components.trainer import export
from components.trainer.config import runlocal
from components.trainer.model import build_model
from components.trainer.preprocessing import Normalization, preprocess_image
from data_prep import features
from tests.data_prep import image_files

LABEL_NAMES = ["cat", "dog", "emu"]
NORMALIZATION = Normalization(mean=(120.0, 110.0, 100.0), std=(60.0, 50.0, 40.0))
IMAGES = [
    image_files.jpeg(seed=1, height=40, width=60),
    image_files.png(seed=2, height=32, width=32),
    image_files.jpeg(seed=3, height=100, width=20),
]


def _example(encoded: bytes) -> bytes:
    """Serving Examples carry the full data contract; only the image is read."""
    return features.serialize_example(
        {
            features.IMAGE: encoded,
            features.IMAGE_FORMAT: b"jpeg",
            features.HEIGHT: 0,
            features.WIDTH: 0,
            features.LABEL: 0,
            features.LABEL_NAME: b"",
            features.SOURCE_PATH: b"",
            features.SHA256: hashlib.sha256(encoded).hexdigest(),
        }
    )


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    config = runlocal()
    model = build_model(config, len(LABEL_NAMES))
    path = str(tmp_path_factory.mktemp("export") / "model")
    export.export_model(model, path, config.image_size, LABEL_NAMES, NORMALIZATION)
    return model, tf.saved_model.load(path), config


def test_signatures_agree_with_each_other_and_the_model(exported):
    model, loaded, config = exported
    by_images = loaded.signatures[export.IMAGES_SIGNATURE](images=tf.constant(IMAGES))
    by_examples = loaded.signatures[export.EXAMPLES_SIGNATURE](
        examples=tf.constant([_example(encoded) for encoded in IMAGES])
    )
    direct = model(
        tf.stack([preprocess_image(e, config.image_size, NORMALIZATION) for e in IMAGES]),
        training=False,
    )

    assert by_images["probabilities"].shape == (len(IMAGES), len(LABEL_NAMES))
    np.testing.assert_allclose(
        by_images["probabilities"], by_examples["probabilities"], rtol=0, atol=1e-5
    )
    np.testing.assert_allclose(by_images["probabilities"], direct, rtol=0, atol=1e-5)
    for outputs in (by_images, by_examples):
        ids = outputs["class_ids"].numpy()
        np.testing.assert_array_equal(ids, np.argmax(direct, -1))
        assert [name.decode() for name in outputs["class_names"].numpy()] == [
            LABEL_NAMES[i] for i in ids
        ]


def test_signature_inputs_are_named_for_tfma_and_clients(exported):
    _, loaded, _ = exported
    examples = loaded.signatures[export.EXAMPLES_SIGNATURE].structured_input_signature[1]
    images = loaded.signatures[export.IMAGES_SIGNATURE].structured_input_signature[1]

    assert list(examples) == ["examples"] and examples["examples"].dtype == tf.string
    assert list(images) == ["images"] and images["images"].dtype == tf.string
    assert export.EXAMPLES_SIGNATURE == "serving_default"
