"""Which datasets (and so which models) included an image, by path or by content, through each
dataset's source index."""

from __future__ import annotations

import dataclasses
import hashlib
import os

from ml_metadata.metadata_store import metadata_store

from components import metadata_keys
from components.ingest.ingest_report_reader import IngestReportRecord
from data_prep.reading import file_access
from data_prep.writing.ingest_outputs import read_source_index
from pipeline.lineage.models import TrainedModel, models_trained_on
from pipeline.lineage.store import MetadataGraph, same_file


@dataclasses.dataclass(frozen=True)
class ImageMatch:
    examples_id: int
    span: int | None
    match: str  # e.g. "path and bytes", "path only (the file changed since)", "bytes only ..."
    path: str  # as recorded in the dataset
    sha256: str
    split: str
    label: str
    shard: str
    models: tuple[TrainedModel, ...]


@dataclasses.dataclass(frozen=True)
class ImageLineage:
    query: str
    sha256: str | None  # of the file now; None when it cannot be read
    matches: tuple[ImageMatch, ...]
    unindexed_examples: tuple[int, ...]  # datasets ingested before source indexes existed


def file_sha256(path: str, roots: tuple[str, ...] | None = None) -> str | None:
    """The file's SHA-256; None when it is no regular file of at most the ingest's file size
    (a pipe or a device is never read), or lies outside roots (when given)."""
    from data_prep.reading.files import open_regular
    from data_prep.reading.image_validation import ImageLimits

    if roots is not None:
        path = os.path.realpath(path)  # no link then leads out of the roots
        if not any(path.startswith(root.rstrip("/") + "/") for root in roots):
            return None
    limit = ImageLimits().max_file_bytes
    digest = hashlib.sha256()
    try:
        with open_regular(path, follow_symlinks=roots is None) as handle:
            if os.fstat(handle.fileno()).st_size > limit:
                return None
            read = 0
            while block := handle.read(min(1 << 20, limit + 1 - read)):
                digest.update(block)
                read += len(block)
                if read > limit:  # it grew
                    return None
    except OSError:  # unreadable, or no regular file
        return None
    return digest.hexdigest()


def data_roots(store: metadata_store.MetadataStore) -> tuple[str, ...]:
    """The local folders the store's datasets were ingested from (a manifest's folder), resolved:
    where an image search may read files."""
    from data_prep.reading.sources import MANIFEST_EXTENSIONS

    roots = set()
    for report in MetadataGraph(store).artifacts_of_type("IngestReport"):
        recorded = IngestReportRecord.read(report).input
        if not recorded or "://" in recorded:
            continue
        if recorded.lower().endswith(MANIFEST_EXTENSIONS):
            recorded = os.path.dirname(recorded)
        roots.add(os.path.realpath(recorded))
    return tuple(sorted(roots))


def _how_matched(same_path: bool, digest: str | None, row: dict) -> str:
    if not same_path:
        return f"bytes only (recorded as {row['path']})"
    if digest is None:
        return "path (the file is not readable here)"
    return "path and bytes" if row["sha256"] == digest else "path only (the file changed since)"


def image_lineage(
    store: metadata_store.MetadataStore, path: str, only_data_roots: bool = False
) -> ImageLineage:
    """Which datasets (and so which models) included an image, by path or by content.

    Reads each dataset's source index (one line per accepted image, written by the ingest beside
    its report), never the shards. A dataset matches when it recorded the same file (its full
    path, or the path relative to the input as given) or the same bytes under any name.
    only_data_roots: read the file for its bytes only when it lies under a folder the store's
    datasets were ingested from (what the web UI allows a visitor to have hashed).
    """
    graph = MetadataGraph(store)
    digest = file_sha256(path, data_roots(store) if only_data_roots else None)
    relative = path.replace(os.sep, "/")
    matches, unindexed = [], []
    for examples in graph.artifacts_of_type("Examples"):
        producer = graph.producer(examples.id, "examples")
        if producer is None:  # not an ExampleGen's dataset (e.g. Transform's materialized output)
            continue
        reports = graph.outputs(producer.id, metadata_keys.INGEST_REPORT_OUTPUT_KEY)
        index_path = IngestReportRecord.read(reports[0]).source_index_path if reports else None
        if index_path is None or not file_access.exists(index_path):
            unindexed.append(examples.id)
            continue
        rows = [
            row
            for row in read_source_index(index_path)
            if row["sha256"] == digest or row["path"] == relative or same_file(row["uri"], path)
        ]
        if not rows:
            continue
        models = models_trained_on(graph, examples.id)
        span = graph.record(examples).properties.get("span")
        for row in rows:
            same_path = row["path"] == relative or same_file(row["uri"], path)
            match = _how_matched(same_path, digest, row)
            matches.append(
                ImageMatch(
                    examples.id,
                    span,
                    match,
                    row["path"],
                    row["sha256"],
                    row["split"],
                    row["label"],
                    row["shard"],
                    models,
                )
            )
    return ImageLineage(path, digest, tuple(matches), tuple(unindexed))
