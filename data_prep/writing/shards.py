"""Second pass: re-reads the planned files of one shard and writes them as a gzip TFRecord file.

Reading again (instead of carrying image bytes through Beam's shuffle) keeps every worker's memory
bounded by a few images (one per thread), whatever the dataset's size. Files kept as they are
(most photos) are not decoded again: their unchanged hash proves they are the bytes that passed
validation. One thread writes one shard from its first file to its last (the job writes several
shards at once, see data_prep/ingest.py), so no core waits on another's gzip stream.
"""

from __future__ import annotations

import hashlib

from apache_beam.io.filesystems import FileSystems

from data_prep.contract import features
from data_prep.reading.image_validation import Accepted, ImageLimits, Reason, validate_image
from data_prep.reading.inspection import read_source
from data_prep.runtime.native_stderr import capture_native_stderr
from data_prep.writing.plan import PlannedExample, ShardSpec
from data_prep.writing.tfrecord import GzipTFRecordWriter


class IngestError(RuntimeError):
    """The data changed under the job; the run stops rather than write what was not validated."""


def write_shard(
    spec: ShardSpec, label_names: dict[int, str], limits: ImageLimits, examples_dir: str
) -> dict:
    """Writes one shard; returns its path, split, example count and size in bytes."""
    destination = FileSystems.join(examples_dir, spec.relative_path)

    with GzipTFRecordWriter(destination) as writer, capture_native_stderr():
        for planned in spec.examples:
            row = _row(planned, label_names[planned.label_id], limits)
            writer.write(features.serialize_example(row))
    size = FileSystems.match([destination])[0].metadata_list[0].size_in_bytes
    return {
        "path": spec.relative_path,
        "split": spec.split,
        "examples": len(spec.examples),
        "bytes": size,
    }


def _row(planned: PlannedExample, label_name: str, limits: ImageLimits) -> dict:
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
        # In this process: these very bytes were decoded within the bounds at inspection, and a
        # wall-clock bound met again on a busier machine must not fail the whole job. Their
        # signals were taken at inspection too.
        image = validate_image(data, limits, with_signals=False)
        if not isinstance(image, Accepted):  # unchanged bytes: a bug, not bad data
            raise IngestError(f"{source.path} passed inspection but now fails: {image}")
        encoded, image_format, height, width = (
            image.encoded,
            image.image_format,
            image.height,
            image.width,
        )
    return {
        features.IMAGE: encoded,
        features.IMAGE_FORMAT: image_format,
        features.HEIGHT: height,
        features.WIDTH: width,
        features.LABEL: planned.label_id,
        features.LABEL_NAME: label_name,
        features.SOURCE_PATH: source.relative_path,
        features.SHA256: planned.sha256,
    }
