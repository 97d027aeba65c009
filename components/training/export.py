"""Exports the trained model as a SavedModel that decodes and preprocesses its own inputs.

Both signatures call the same preprocess_image as training, with the normalization constants baked
into the graph, so serving cannot drift from training:
  serving_default: serialized tf.Examples (input 'examples'), as TFMA and TF Serving send them;
    only the image feature is read.
  serving_images: raw encoded image bytes, JPEG or PNG (input 'images'), for clients without
    tf.Example.
Both return class_ids (int64 [batch]), class_names (string [batch]) and probabilities (float32
[batch, classes], in label-id order).
assets.extra/ holds TensorFlow Serving warmup requests, the label names and the normalization
constants (serving_assets.py).
"""

from __future__ import annotations

import json
import os

import tensorflow as tf
import tf_keras as keras
from tf_keras.protobuf import saved_metadata_pb2

from components.training.model import float32_twin, in_float32
from components.training.preprocessing import CHANNELS, Normalization, preprocess_image
from components.training.serving_assets import write_serving_assets
from data_prep.contract import features

EXAMPLES_SIGNATURE = "serving_default"
IMAGES_SIGNATURE = "serving_images"

KERAS_METADATA_FILE = "keras_metadata.pb"  # where a Keras-made SavedModel records its layers
VARIABLES_PREFIX = os.path.join("variables", "variables")  # the SavedModel's checkpoint


def rebuild_keras_model(saved_model_dir: str) -> keras.Model:
    """The exported Keras model, built from the architecture the SavedModel records and given
    its variables: the same model keras.models.load_model returns, without reviving every layer
    from the SavedModel, which costs seconds. Fails when a variable of the architecture is
    missing from the checkpoint. Computes in float32 whatever policy it trained
    under: TFLite has no bfloat16 type (a model trained under mixed_bfloat16 failed both
    conversions, "Failed to convert element type 'bf16'")."""
    metadata = saved_metadata_pb2.SavedMetadata()
    with tf.io.gfile.GFile(os.path.join(saved_model_dir, KERAS_METADATA_FILE), "rb") as handle:
        metadata.ParseFromString(handle.read())
    [root] = [node for node in metadata.nodes if node.node_path == "root"]
    model = keras.models.model_from_json(
        json.dumps(in_float32(json.loads(root.metadata)["model_config"])),
    )
    restored = model.load_weights(os.path.join(saved_model_dir, VARIABLES_PREFIX))
    restored.assert_existing_objects_matched()
    # The checkpoint also holds what the SavedModel's signatures capture, which the Keras model
    # has no place for: unmatched by design, so no warning about it when the status is freed.
    restored.expect_partial()
    # Layers that derive constants from their variables (a Normalization's mean and variance)
    # take them up in finalize_state, which Keras calls after a checkpoint restore only for the
    # outer model's own layers, not for those of a nested backbone.
    for layer in model.submodules:
        if isinstance(layer, keras.layers.Layer):
            layer.finalize_state()
    return model


def export_model(
    model: keras.Model,
    export_dir: str,
    image_size: int,
    label_names: list[str],
    normalization: Normalization,
) -> str:
    """Saves `model` (normalized images -> probabilities) with both signatures, warmup requests
    and label names; returns the path. A model trained under a mixed policy is saved as its
    float32 twin (model.float32_twin)."""
    model = float32_twin(model)
    class_names = tf.constant(list(label_names), tf.string)
    image_spec = tf.TensorSpec([image_size, image_size, CHANNELS], tf.float32)

    def predict(encoded: tf.Tensor) -> dict[str, tf.Tensor]:
        images = tf.map_fn(
            lambda one: preprocess_image(one, image_size, normalization),
            encoded,
            fn_output_signature=image_spec,
        )
        probabilities = model(images, training=False)
        class_ids = tf.argmax(probabilities, axis=-1)
        return {
            "class_ids": class_ids,
            "class_names": tf.gather(class_names, class_ids),
            "probabilities": probabilities,
        }

    # No AutoGraph: nothing here branches on tensors, and it would convert tf_keras' own code
    # on each trace (its rules exempt 'keras', not tf_keras), most of the export's time.
    @tf.function(
        input_signature=[tf.TensorSpec([None], tf.string, name="examples")], autograph=False
    )
    def serve_examples(examples):
        parse_spec = {features.IMAGE: features.feature_spec()[features.IMAGE]}
        return predict(tf.io.parse_example(examples, parse_spec)[features.IMAGE])

    @tf.function(input_signature=[tf.TensorSpec([None], tf.string, name="images")], autograph=False)
    def serve_images(images):
        return predict(images)

    signatures = {EXAMPLES_SIGNATURE: serve_examples, IMAGES_SIGNATURE: serve_images}
    # Without a traced function per layer: nothing reads them (serving, TFMA and the report call
    # the signatures; TFLiteExport and warm starts rebuild the model from its recorded config and
    # variables), and they make both the save and every later load several times slower.
    model.save(export_dir, save_format="tf", signatures=signatures, save_traces=False)
    write_serving_assets(
        export_dir,
        image_size,
        list(label_names),
        normalization,
        EXAMPLES_SIGNATURE,
        IMAGES_SIGNATURE,
    )
    return export_dir
