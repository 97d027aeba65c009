"""Second pass: re-reads the planned files of one shard and writes them as a gzip TFRecord file.

Reading again (instead of carrying image bytes through Beam's shuffle) keeps every worker's memory
bounded by one image, whatever the dataset's size. Files kept as they are (most photos) are not
decoded again: their unchanged hash proves they are the bytes that passed validation.
"""

from __future__ import annotations

import hashlib
import os
import tempfile

import tensorflow as tf
from apache_beam.io.filesystems import FileSystems

from data_prep import features
from data_prep.image_validation import Accepted, ImageLimits, Reason, validate_image
from data_prep.inspection import read_source
from data_prep.plan import ShardSpec

_GZIP = tf.io.TFRecordOptions(compression_type="GZIP")
# Filesystems TensorFlow writes natively; others are written locally, then copied through Beam.
_TF_NATIVE_SCHEMES = ("", "gs")


class IngestError(RuntimeError):
    """The data changed under the job or cannot be written; the run stops."""


def write_shard(
    spec: ShardSpec, label_names: dict[int, str], limits: ImageLimits, examples_dir: str
) -> dict:
    """Writes one shard; returns its path, split, example count and size in bytes."""
    destination = FileSystems.join(examples_dir, spec.relative_path)
    records = (
        _example(planned, label_names[planned.label_id], limits).SerializeToString(
            deterministic=True
        )
        for planned in spec.examples
    )
    scheme = destination.split("://")[0] if "://" in destination else ""
    if scheme in _TF_NATIVE_SCHEMES:
        tf.io.gfile.makedirs(os.path.dirname(destination))
        partial = destination + ".incomplete"
        _write_records(records, partial)  # a retried or killed bundle never leaves half a shard
        tf.io.gfile.rename(partial, destination, overwrite=True)
    else:
        with tempfile.TemporaryDirectory() as scratch:
            local = os.path.join(scratch, "shard.gz")
            _write_records(records, local)
            with open(local, "rb") as source, FileSystems.create(destination) as target:
                while chunk := source.read(1 << 22):
                    target.write(chunk)
    size = FileSystems.match([destination])[0].metadata_list[0].size_in_bytes
    return {
        "path": spec.relative_path,
        "split": spec.split,
        "examples": len(spec.examples),
        "bytes": size,
    }


def _write_records(records, path: str) -> None:
    with tf.io.TFRecordWriter(path, options=_GZIP) as writer:
        for record in records:
            writer.write(record)


def _example(planned, label_name: str, limits: ImageLimits) -> tf.train.Example:
    source = planned.source
    data = read_source(source, limits.max_file_bytes + 1)
    if hashlib.sha256(data).hexdigest() != planned.sha256:
        raise IngestError(f"{Reason.CHANGED_DURING_INGEST}: {source.path} changed while ingesting")
    if planned.keeps_original_bytes:
        encoded, image_format, height, width = (
            data,
            planned.image_format,
            planned.height,
            planned.width,
        )
    else:
        image = validate_image(data, limits)
        if not isinstance(image, Accepted):  # unchanged bytes: a bug, not bad data
            raise IngestError(f"{source.path} passed inspection but now fails: {image}")
        encoded, image_format, height, width = (
            image.encoded,
            image.image_format,
            image.height,
            image.width,
        )
    return features.make_example(
        encoded=encoded,
        image_format=image_format,
        height=height,
        width=width,
        label=planned.label_id,
        label_name=label_name,
        source_path=source.relative_path,
        sha256=planned.sha256,
    )
