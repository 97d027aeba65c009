"""Both serving signatures run the training preprocessing and agree with each other and with the
training input path; the export carries valid TF Serving warmup requests, its label names and
the normalization its signatures apply; the Keras model is rebuilt from an export exactly."""

import dataclasses
import hashlib
import os
import shutil

import numpy as np
import pytest
import tensorflow as tf
import tf_keras as keras
from tensorflow_serving.apis import prediction_log_pb2

from components.serving.serving_probe import check_outputs
from components.training import export, input_pipeline, serving_assets
from components.training.model import BackboneInput, build_model
from components.training.preprocessing import Normalization, preprocess_image
from components.training.trainer_config import runlocal
from data_prep.contract import features
from tests.data_prep import image_files

pytestmark = pytest.mark.slow  # builds and exports a SavedModel with both signatures
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


@pytest.fixture(
    scope="module",
    params=[{}, {"backbone_preprocessing": True}],
    ids=["from_scratch", "backbone_preprocessing"],
)
def exported(tmp_path_factory, request):
    """A model on the dataset's statistics, and one whose backbone brings its own preprocessing
    (as fine-tuning does: BackboneInput inside the model; test_model checks each backbone's)."""
    config = dataclasses.replace(runlocal(), **request.param)
    model = build_model(config, len(LABEL_NAMES), NORMALIZATION)
    path = str(tmp_path_factory.mktemp("export") / "model")
    export.export_model(model, path, config.image_size, LABEL_NAMES, NORMALIZATION)
    return model, tf.saved_model.load(path), config, path


def test_signatures_agree_with_each_other_and_the_model(exported):
    model, loaded, config, _ = exported
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
    _, loaded, _, _ = exported
    examples = loaded.signatures[export.EXAMPLES_SIGNATURE].structured_input_signature[1]
    images = loaded.signatures[export.IMAGES_SIGNATURE].structured_input_signature[1]

    assert list(examples) == ["examples"] and examples["examples"].dtype == tf.string
    assert list(images) == ["images"] and images["images"].dtype == tf.string
    assert export.EXAMPLES_SIGNATURE == "serving_default"


def test_training_input_path_and_each_signature_give_the_same_probabilities(
    exported, shard_pattern
):
    """The skew test: records through the evaluation tf.data pipeline (the training input path
    without augmentation) into the Keras model, and the same records through each serving
    signature, agree to 1e-5 in float32."""
    model, loaded, config, _ = exported
    plan = input_pipeline.plan_pipeline(
        "eval", shard_pattern, config.image_size, 4, cache_budget_bytes=0, training=False
    )
    through_training = np.concatenate(
        [
            model(images, training=False).numpy()
            for images, _ in input_pipeline.eval_dataset(plan, config.image_size, NORMALIZATION)
        ]
    )
    # The same records in the same order: the pipeline's own first stages.
    records = input_pipeline.interleave_records(
        input_pipeline.list_files(plan.files, shuffle=False), plan.parallel_reads, True
    )
    records = tf.constant([record.numpy() for record in records])
    encoded = tf.io.parse_example(
        records, {features.IMAGE: features.feature_spec()[features.IMAGE]}
    )[features.IMAGE]
    by_examples = loaded.signatures[export.EXAMPLES_SIGNATURE](examples=records)["probabilities"]
    by_images = loaded.signatures[export.IMAGES_SIGNATURE](images=encoded)["probabilities"]

    assert through_training.shape == (plan.examples, len(LABEL_NAMES))
    # The model tells these images apart, so a preprocessing skew would show.
    assert np.ptp(through_training, axis=0).max() > 1e-3
    for served in (by_examples, by_images):
        assert served.dtype == tf.float32
        assert np.abs(served.numpy() - through_training).max() <= 1e-5


def test_warmup_requests_are_prediction_logs_the_model_answers(exported):
    _, loaded, _, model_dir = exported
    path = os.path.join(model_dir, serving_assets.ASSETS_EXTRA, serving_assets.WARMUP_FILE)
    logs = [
        prediction_log_pb2.PredictionLog.FromString(record.numpy())
        for record in tf.data.TFRecordDataset(str(path))
    ]

    assert sorted(log.predict_log.request.model_spec.signature_name for log in logs) == sorted(
        [export.EXAMPLES_SIGNATURE, export.IMAGES_SIGNATURE]
    )
    for log in logs:
        request = log.predict_log.request
        signature = loaded.signatures[request.model_spec.signature_name]
        assert list(request.inputs) == list(signature.structured_input_signature[1])
        outputs = signature(**serving_assets.request_inputs(request))
        assert check_outputs(request.model_spec.signature_name, outputs, 1, LABEL_NAMES) == []
    assert serving_assets.read_label_names(model_dir) == LABEL_NAMES


def test_the_export_names_the_normalization_its_signatures_apply(exported):
    *_, model_dir = exported
    assert serving_assets.read_normalization(model_dir) == NORMALIZATION


def test_a_model_trained_under_mixed_bfloat16_is_served_in_float32(tmp_path):
    config = runlocal()
    previous = tf.keras.mixed_precision.global_policy()
    tf.keras.mixed_precision.set_global_policy("mixed_bfloat16")
    try:
        model = build_model(config, len(LABEL_NAMES), NORMALIZATION)
    finally:
        tf.keras.mixed_precision.set_global_policy(previous)
    assert _bfloat16_tensors(_export_graph(model, str(tmp_path / "trained"), config)) == 0
    served = tf.saved_model.load(str(tmp_path / "trained")).signatures[export.IMAGES_SIGNATURE]
    answered = served(images=tf.constant(IMAGES))["probabilities"]
    assert answered.dtype == tf.float32
    pixels = tf.stack([preprocess_image(e, config.image_size, NORMALIZATION) for e in IMAGES])
    np.testing.assert_allclose(answered, model(pixels, training=False), atol=0.05)


def _export_graph(model, path, config):
    export.export_model(model, path, config.image_size, LABEL_NAMES, NORMALIZATION)
    return tf.saved_model.load(path).signatures[export.IMAGES_SIGNATURE].graph


def _bfloat16_tensors(graph) -> int:
    """bfloat16 outputs of the graph's ops and of every function it calls (the model's layers)."""
    here = sum(t.dtype == tf.bfloat16 for op in graph.get_operations() for t in op.outputs)
    functions = graph._functions.values()  # noqa: SLF001  (no public walk over called functions)
    return here + sum(_bfloat16_tensors(f.graph) for f in functions if hasattr(f, "graph"))


def test_the_rebuilt_keras_model_is_the_exported_one(tmp_path):
    config = dataclasses.replace(runlocal(), backbone_preprocessing=True)  # a custom layer too
    exported = build_model(config, 3, NORMALIZATION)
    exported.save(tmp_path / "model", save_format="tf")
    images = np.random.default_rng(1).normal(size=(4, *exported.input_shape[1:]))

    rebuilt = export.rebuild_keras_model(str(tmp_path / "model"))
    loaded = keras.models.load_model(tmp_path / "model", compile=False)

    assert any(isinstance(layer, BackboneInput) for layer in rebuilt.layers)
    assert [w.name for w in rebuilt.weights] == [w.name for w in loaded.weights]
    for mine, theirs in zip(rebuilt.weights, loaded.weights, strict=True):
        assert np.array_equal(mine.numpy(), theirs.numpy())
    assert np.array_equal(rebuilt(images, training=False), loaded(images, training=False))


def test_rebuilding_refuses_variables_that_miss_part_of_the_architecture(tmp_path):
    inputs = keras.Input((4,))
    smaller = keras.Model(inputs, keras.layers.Dense(3)(inputs))
    larger = keras.Model(inputs, keras.layers.Dense(3)(keras.layers.Dense(3)(inputs)))
    smaller.save(tmp_path / "smaller", save_format="tf")
    larger.save(tmp_path / "larger", save_format="tf")
    shutil.rmtree(tmp_path / "larger" / "variables")
    shutil.copytree(tmp_path / "smaller" / "variables", tmp_path / "larger" / "variables")

    with pytest.raises(AssertionError):
        export.rebuild_keras_model(str(tmp_path / "larger"))
