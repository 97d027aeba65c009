"""After a run failed reading its data: which shard is damaged, and a cache that stops serving it.

TensorFlow's DataLossError says "corrupted record at 147894" and names no file. When a failure
reads like data loss, every shard of the run's Examples artifact is checked (the record framing
and CRC-32C of data_prep/writing/tfrecord.py); a damaged one is named, and the artifact is marked
DELETED in ML Metadata: TFX answers a component from its cache only when every output artifact
is LIVE, so the next run ingests the images again instead of failing the same way for ever.
"""

from __future__ import annotations

import re

from apache_beam.io.filesystems import FileSystems
from ml_metadata.metadata_store import metadata_store
from ml_metadata.proto import metadata_store_pb2 as mlmd_pb2

from data_prep.writing.tfrecord import shard_problem

# How TensorFlow, zlib and Beam (which wraps a worker's error in text) word a damaged file.
_DATA_LOSS = re.compile(
    r"DataLoss|corrupted record|decompress|incorrect (data|header) check|CRC", re.IGNORECASE
)


class DamagedShard(RuntimeError):
    """A shard of the run's dataset is damaged; the message names it and what to run."""


def damaged_shard_failure(
    store: metadata_store.MetadataStore, examples_id: int | None, error: BaseException
) -> DamagedShard | None:
    """The error to report instead of `error` when it comes from a damaged shard of the Examples
    artifact examples_id (then marked DELETED); None when it does not."""
    if examples_id is None or not _DATA_LOSS.search(f"{type(error).__name__}: {error}"):
        return None
    [examples] = store.get_artifacts_by_id([examples_id])
    shards = sorted(FileSystems.match([f"{examples.uri}/Split-*/*"])[0].metadata_list, key=str)
    damaged = [
        (item.path, problem) for item in shards if (problem := shard_problem(item.path)) is not None
    ]
    if not damaged:
        return None
    examples.state = mlmd_pb2.Artifact.DELETED
    store.put_artifacts([examples])
    path, problem = damaged[0]
    more = f" (and {len(damaged) - 1} more shards)" if len(damaged) > 1 else ""
    return DamagedShard(
        f"shard {path} is damaged ({problem}){more}: run `imgpipe run` again to ingest the "
        f"images anew (the damaged dataset, Examples {examples_id}, is no longer reused)"
    )
