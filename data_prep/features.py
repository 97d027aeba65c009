"""The data contract: the tf.train.Example features every stage reads and writes.

Ingest, Transform, the trainer, serving and evaluation all import the names from here, so a
renamed feature breaks loudly in one place instead of silently in five.
"""

import tensorflow as tf

IMAGE = "image"  # encoded bytes: JPEG or PNG, 8-bit RGB, EXIF orientation already applied
IMAGE_FORMAT = "image_format"  # b"jpeg" or b"png"
HEIGHT = "height"
WIDTH = "width"
LABEL = "label"  # int64 id from the label map
LABEL_NAME = "label_name"
SOURCE_PATH = "source_path"  # path relative to the ingest input, for lineage and error reports
SHA256 = "sha256"  # hex digest of the original file's bytes

FEATURE_SPEC = {
    IMAGE: tf.io.FixedLenFeature([], tf.string),
    IMAGE_FORMAT: tf.io.FixedLenFeature([], tf.string),
    HEIGHT: tf.io.FixedLenFeature([], tf.int64),
    WIDTH: tf.io.FixedLenFeature([], tf.int64),
    LABEL: tf.io.FixedLenFeature([], tf.int64),
    LABEL_NAME: tf.io.FixedLenFeature([], tf.string),
    SOURCE_PATH: tf.io.FixedLenFeature([], tf.string),
    SHA256: tf.io.FixedLenFeature([], tf.string),
}


def _bytes(value: bytes) -> tf.train.Feature:
    return tf.train.Feature(bytes_list=tf.train.BytesList(value=[value]))


def _int64(value: int) -> tf.train.Feature:
    return tf.train.Feature(int64_list=tf.train.Int64List(value=[value]))


def make_example(
    *,
    encoded: bytes,
    image_format: str,
    height: int,
    width: int,
    label: int,
    label_name: str,
    source_path: str,
    sha256: str,
) -> tf.train.Example:
    """Builds the one Example layout the whole project agrees on."""
    return tf.train.Example(
        features=tf.train.Features(
            feature={
                IMAGE: _bytes(encoded),
                IMAGE_FORMAT: _bytes(image_format.encode()),
                HEIGHT: _int64(height),
                WIDTH: _int64(width),
                LABEL: _int64(label),
                LABEL_NAME: _bytes(label_name.encode()),
                SOURCE_PATH: _bytes(source_path.encode()),
                SHA256: _bytes(sha256.encode()),
            }
        )
    )
