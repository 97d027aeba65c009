"""Reads one split of an Examples artifact in batches, in a fixed order, for post-training checks
(the readable evaluation, the TFLite comparison) that score every example and name it.

Each batch keeps the serialized records (what serving_default takes) beside the parsed label,
source path and image bytes, so a check can score the shipped SavedModel on exactly what TFMA
sends it and still say which file each answer belongs to.
"""

import dataclasses
from collections.abc import Iterator

import numpy as np
import tensorflow as tf

from data_prep.contract import features

_KEYS = (features.IMAGE, features.LABEL, features.SOURCE_PATH)


@dataclasses.dataclass(frozen=True)
class ExampleBatch:
    records: tf.Tensor  # string [n]: serialized tf.Examples
    images: tf.Tensor  # string [n]: encoded image bytes
    labels: np.ndarray  # int64 [n]
    source_paths: list[str]


def split_files(examples, split: str) -> list[str]:
    """The split's shards (of a standard_artifacts.Examples); a clear error when the artifact has
    no such split or it is empty. TFX is imported here: the report's thumbnails need
    read_batches alone."""
    from tfx.types import artifact_utils

    uri = artifact_utils.get_split_uri([examples], split)
    files = sorted(tf.io.gfile.glob(f"{uri}/*"))
    if not files:
        raise ValueError(f"split {split!r} of {examples.uri} has no files")
    return files


def read_batches(files: list[str], batch_size: int = 256) -> Iterator[ExampleBatch]:
    spec = {key: features.feature_spec()[key] for key in _KEYS}
    dataset = tf.data.TFRecordDataset(files, compression_type="GZIP").batch(batch_size)
    for records in dataset:
        parsed = tf.io.parse_example(records, spec)
        yield ExampleBatch(
            records=records,
            images=parsed[features.IMAGE],
            labels=parsed[features.LABEL].numpy(),
            source_paths=[path.decode() for path in parsed[features.SOURCE_PATH].numpy()],
        )
