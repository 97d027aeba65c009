"""Tiny TFRecord shards of labelled JPEGs, written the way ingest writes them."""

import hashlib

import pytest

from data_prep.contract import features
from data_prep.writing.tfrecord import GzipTFRecordWriter
from tests.data_prep import image_files

LABEL_NAMES = ["a", "b", "c"]
SHARDS = 2
EXAMPLES_PER_SHARD = 7  # 14 in all: with batch 4 the last batch of an epoch would be partial


def write_shard(path: str, start: int, count: int) -> None:
    with GzipTFRecordWriter(path) as writer:
        for index in range(start, start + count):
            encoded = image_files.jpeg(seed=index, height=24 + index, width=40)
            label = index % len(LABEL_NAMES)
            row = {
                features.IMAGE: encoded,
                features.IMAGE_FORMAT: b"jpeg",
                features.HEIGHT: 24 + index,
                features.WIDTH: 40,
                features.LABEL: label,
                features.LABEL_NAME: LABEL_NAMES[label],
                features.SOURCE_PATH: f"{LABEL_NAMES[label]}/{index}.jpg",
                features.SHA256: hashlib.sha256(encoded).hexdigest(),
            }
            writer.write(features.serialize_example(row))


@pytest.fixture(scope="session")
def shard_dir(tmp_path_factory):
    """A folder of SHARDS gzip shards, EXAMPLES_PER_SHARD examples each, images of varied sizes."""
    directory = tmp_path_factory.mktemp("shards")
    for shard in range(SHARDS):
        path = directory / f"data_tfrecord-{shard:05d}-of-{SHARDS:05d}.gz"
        write_shard(str(path), shard * EXAMPLES_PER_SHARD, EXAMPLES_PER_SHARD)
    return directory


@pytest.fixture(scope="session")
def shard_pattern(shard_dir):
    return str(shard_dir / "*.gz")
