"""Image embeddings for data health: EfficientNet-Lite0's ImageNet features, 1,280 floats per
image (the backbone's average-pooled output), computed once per image, in batches, in-process.

The weights are the offline ones the trainer uses (components/training/efficientnet_lite.py).
Images are decoded and resized as the trainer does (whole image, antialiased); the backbone
holds Lite0's own pixel normalization, so it takes 0..255 pixels.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import tensorflow as tf
import tf_keras as keras

from components.evaluation.eval_split import read_batches
from components.training import efficientnet_lite
from components.training.model import load_backbone_weights
from components.training.preprocessing import decode_and_resize

EMBEDDING_SIZE = 1280
DEFAULT_IMAGE_SIZE = efficientnet_lite.DEFAULT_SIZE  # the size ImageNet's weights were made at
BATCH_SIZE = 64


@dataclasses.dataclass(frozen=True)
class Embeddings:
    """Every example's embedding, in the order of the files read."""

    source_paths: list[str]
    labels: np.ndarray  # int64 [n]
    vectors: np.ndarray  # float32 [n, EMBEDDING_SIZE]


def lite0_imagenet_backbone(image_size: int) -> keras.Model:
    """Lite0 without its head, ImageNet weights, float32 whatever the process's policy."""
    previous = keras.mixed_precision.global_policy()
    keras.mixed_precision.set_global_policy("float32")
    try:
        backbone = efficientnet_lite.efficientnet_lite0((image_size, image_size, 3))
    finally:
        keras.mixed_precision.set_global_policy(previous)
    load_backbone_weights(backbone, efficientnet_lite.imagenet_weights_file())
    return backbone


def embed_examples(files: list[str], image_size: int = DEFAULT_IMAGE_SIZE) -> Embeddings:
    """The embedding of every example in the gzip TFRecord files (data contract features)."""
    backbone = lite0_imagenet_backbone(image_size)
    embed = tf.function(
        lambda images: backbone(images, training=False),
        input_signature=[tf.TensorSpec([None, image_size, image_size, 3], tf.float32)],
    )
    paths, labels, vectors = [], [], []
    for batch in read_batches(files, BATCH_SIZE):
        images = tf.map_fn(
            lambda encoded: decode_and_resize(encoded, image_size),
            batch.images,
            fn_output_signature=tf.TensorSpec([image_size, image_size, 3], tf.float32),
        )
        vectors.append(embed(images).numpy())
        labels.append(batch.labels)
        paths += batch.source_paths
    if not paths:
        return Embeddings([], np.zeros(0, np.int64), np.zeros((0, EMBEDDING_SIZE), np.float32))
    return Embeddings(paths, np.concatenate(labels), np.concatenate(vectors))
