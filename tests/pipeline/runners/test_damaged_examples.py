"""A failure that reads like data loss names the damaged shard and takes its dataset out of the
cache; other failures, and data loss with whole shards, are left as they were."""

import os

import pytest
from ml_metadata.metadata_store import metadata_store
from ml_metadata.proto import metadata_store_pb2 as mlmd_pb2

from data_prep.writing.tfrecord import GzipTFRecordWriter
from pipeline.runners.damaged_examples import damaged_shard_failure

DATA_LOSS = RuntimeError("DataLossError: corrupted record at 147894 [Op:IteratorGetNext]")


@pytest.fixture
def examples(tmp_path):
    """A store in memory with one Examples artifact of two whole shards: (store, id, shards)."""
    config = mlmd_pb2.ConnectionConfig()
    config.fake_database.SetInParent()
    store = metadata_store.MetadataStore(config)
    type_id = store.put_artifact_type(mlmd_pb2.ArtifactType(name="Examples"))
    shards = []
    for split in ("train", "eval"):
        os.makedirs(tmp_path / f"Split-{split}")
        path = str(tmp_path / f"Split-{split}" / "data-00000-of-00001.gz")
        with GzipTFRecordWriter(path) as writer:
            for index in range(4):
                writer.write(bytes([index]) * 500)
        shards.append(path)
    artifact = mlmd_pb2.Artifact(type_id=type_id, uri=str(tmp_path), state=mlmd_pb2.Artifact.LIVE)
    [artifact_id] = store.put_artifacts([artifact])
    return store, artifact_id, shards


def _flip(path: str) -> None:
    with open(path, "r+b") as handle:
        data = bytearray(handle.read())
        data[len(data) // 2] ^= 0x01
        handle.seek(0)
        handle.write(bytes(data))


def _state(store, artifact_id) -> int:
    return store.get_artifacts_by_id([artifact_id])[0].state


def test_a_flipped_bit_is_named_with_the_command_and_the_dataset_leaves_the_cache(examples):
    store, artifact_id, shards = examples
    _flip(shards[1])
    failure = damaged_shard_failure(store, artifact_id, DATA_LOSS)
    assert str(failure).startswith(f"shard {shards[1]} is damaged (corrupted record at ")
    assert "run `imgpipe run` again to ingest the images anew" in str(failure)
    assert _state(store, artifact_id) == mlmd_pb2.Artifact.DELETED


def test_whole_shards_or_another_failure_change_nothing(examples):
    store, artifact_id, shards = examples
    assert damaged_shard_failure(store, artifact_id, DATA_LOSS) is None
    _flip(shards[0])
    assert damaged_shard_failure(store, artifact_id, ValueError("bad learning rate")) is None
    assert damaged_shard_failure(store, None, DATA_LOSS) is None
    assert _state(store, artifact_id) == mlmd_pb2.Artifact.LIVE
