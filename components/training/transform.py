"""Transform's module: what the model needs from the whole train split, computed with Beam.

Per-channel pixel mean and standard deviation at the model's input size, through the same
decode-and-resize the trainer and serving run. Pixels are decoded only to be summarized; Transform
runs with materialize=False, so no decoded image is ever written. The class names and counts are
not computed here: the label map and the ingest report (ImageExampleGen's) hold them, and a label
vocabulary beside them would only add Beam stages to Transform.
"""

import tensorflow as tf
import tensorflow_transform as tft

from components.training.preprocessing import CHANNELS, Normalization, decode_and_resize
from data_prep.contract import features

PIXEL_MEAN = "pixel_mean"
PIXEL_STD = "pixel_std"
IMAGE_SIZE_KEY = "image_size"  # custom_config key
# TFT in graph mode (tf.compat.v1) for the analysis and the saved transform graph: nothing reads
# that graph but TFTransformOutput (the statistics), and building and saving a TF1 graph costs
# less CPU than tracing tf.functions and saving a TF2 SavedModel, for the same mean and std.
FORCE_TF_COMPAT_V1 = True


def preprocessing_fn(inputs: dict, custom_config: dict) -> dict:
    image_size = int(custom_config[IMAGE_SIZE_KEY])
    encoded = tf.reshape(inputs[features.IMAGE], [-1])
    images = tf.map_fn(
        lambda one: decode_and_resize(one, image_size),
        encoded,
        fn_output_signature=tf.TensorSpec([image_size, image_size, CHANNELS], tf.float32),
    )
    # Every image has the same pixel count, so the mean of per-image means is the pixel mean.
    mean = tft.mean(tf.reduce_mean(images, axis=[1, 2]), reduce_instance_dims=False)
    mean_square = tft.mean(
        tf.reduce_mean(tf.square(images), axis=[1, 2]), reduce_instance_dims=False
    )
    std = tf.sqrt(tf.maximum(mean_square - tf.square(mean), 0.0))
    batch = tf.shape(encoded)[:1]
    return {
        features.LABEL: tf.reshape(inputs[features.LABEL], [-1]),
        PIXEL_MEAN: tf.tile(mean[tf.newaxis], tf.concat([batch, [1]], 0)),
        PIXEL_STD: tf.tile(std[tf.newaxis], tf.concat([batch, [1]], 0)),
    }


def normalization_from_transform(transform_output: tft.TFTransformOutput) -> Normalization:
    """The train split's pixel statistics baked into a transform graph, for training (the Trainer
    and the Tuner's trials); an export records them in assets.extra/normalization.json, which
    every later reader uses (components/training/serving_assets.py)."""
    probe = _probe_example()
    raw = tf.io.parse_example([probe], transform_output.raw_feature_spec())
    transformed = transform_output.transform_features_layer()(raw)
    mean = transformed[PIXEL_MEAN][0].numpy().tolist()
    std = transformed[PIXEL_STD][0].numpy().tolist()
    return Normalization(tuple(mean), tuple(std)).validate()


def _probe_example() -> bytes:
    """A one-pixel example: the statistics do not depend on it, but the graph needs an input."""
    pixel = tf.io.encode_png(tf.zeros([1, 1, CHANNELS], tf.uint8)).numpy()
    row = {name: b"probe" for name in features.FEATURE_NAMES}
    row.update({features.IMAGE: pixel, features.HEIGHT: 1, features.WIDTH: 1, features.LABEL: 0})
    return features.serialize_example(row)
