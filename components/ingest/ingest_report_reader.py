"""The IngestReport artifact read back: what ImageExampleGen records on it in ML Metadata
(the names in metadata_keys) and where the ingest's files lie under its URI. No TFX import:
lineage reads it without loading TensorFlow. The writer is
components/ingest/image_example_gen.py."""

from __future__ import annotations

import dataclasses
import json

from ml_metadata.proto import metadata_store_pb2 as mlmd_pb2

from components import metadata_keys
from data_prep.writing.ingest_outputs import IngestOutputs


@dataclasses.dataclass(frozen=True)
class IngestReportRecord:
    """An IngestReport's recorded properties; its files by report_path and source_index_path."""

    uri: str
    input: str | None
    span: int | None
    counts: dict[str, int]  # metadata_keys.INGEST_COUNTS: found, accepted, rejected, ignored
    label_map: dict[str, int]
    classes_left_out: tuple[str, ...]  # class folders with no accepted image
    # The share of distinct images in near-duplicate clusters; None from an older ingest.
    near_duplicate_fraction: float | None = None

    @classmethod
    def read(cls, artifact: mlmd_pb2.Artifact) -> IngestReportRecord:
        properties = artifact.custom_properties

        def text(name: str, default: str) -> str:
            return properties[name].string_value if name in properties else default

        return cls(
            uri=artifact.uri,
            input=text(metadata_keys.INGEST_INPUT_PROPERTY, "") or None,
            span=(
                properties[metadata_keys.INGEST_SPAN_PROPERTY].int_value
                if metadata_keys.INGEST_SPAN_PROPERTY in properties
                else None
            ),
            counts={
                name: properties[name].int_value
                for name in metadata_keys.INGEST_COUNTS
                if name in properties
            },
            label_map=json.loads(text(metadata_keys.LABEL_MAP_PROPERTY, "{}")),
            classes_left_out=tuple(json.loads(text(metadata_keys.CLASSES_LEFT_OUT_PROPERTY, "[]"))),
            near_duplicate_fraction=(
                properties[metadata_keys.NEAR_DUPLICATE_FRACTION_PROPERTY].double_value
                if metadata_keys.NEAR_DUPLICATE_FRACTION_PROPERTY in properties
                else None
            ),
        )

    @property
    def report_path(self) -> str:
        """The ingest's report: every file's fate, counts per split and per reject reason."""
        return IngestOutputs.under(self.uri).report_path

    @property
    def source_index_path(self) -> str:
        """One line per accepted image (path, sha256, split, label, shard)."""
        return IngestOutputs.under(self.uri).source_index_path
