"""Where the ingest writes its outputs (shards, label map, report, source index), and the
source index read back: no Beam import, so lineage finds and reads these files without it."""

from __future__ import annotations

import dataclasses
import gzip
import json
import posixpath

from data_prep.reading import file_access

SOURCE_INDEX_FILE = "source_index.jsonl.gz"
# The report's count of each split's images per class and value of height, width and BRIGHTNESS
# (an image's mean brightness level, data_prep/quality/health.py), written by
# data_prep/writing/plan.py and read by the data gate.
CLASS_HISTOGRAMS = "histograms_per_class"
BRIGHTNESS = "brightness"


@dataclasses.dataclass(frozen=True)
class IngestOutputs:
    examples_dir: str  # Split-<name>/ folders of gzip TFRecord shards
    label_map_path: str
    report_path: str

    @classmethod
    def under(cls, output_dir: str, examples_dir: str | None = None) -> IngestOutputs:
        """The layout `imgpipe prep` writes: shards, label map and report in one folder; or,
        with examples_dir (ImageExampleGen's two artifacts), the shards there."""
        return cls(
            examples_dir or output_dir,
            posixpath.join(output_dir, "label_map.json"),
            posixpath.join(output_dir, "ingest_report.json"),
        )

    @property
    def source_index_path(self) -> str:
        """Beside the report: one line per accepted image (see write_source_index)."""
        return posixpath.join(posixpath.dirname(self.report_path), SOURCE_INDEX_FILE)


def read_source_index(path: str) -> list[dict]:
    """The rows data_prep/ingest.py write_source_index wrote."""
    text = gzip.decompress(file_access.read_bytes(path)).decode()
    return [json.loads(line) for line in text.splitlines()]
