"""The EvaluationReport artifact's evaluation.json read back, without the TFX import of its
writer (components/evaluation_report.py): run summaries and the UI read it without loading
TensorFlow."""

from __future__ import annotations

import json
import posixpath

from data_prep import file_access

REPORT_FILE = "evaluation.json"


def read_report(report_uri: str) -> dict | None:
    """evaluation.json of an EvaluationReport artifact (see evaluation_report.build_report for
    its keys); None when its files are gone (a pipeline root cleaned by hand)."""
    path = posixpath.join(report_uri, REPORT_FILE)
    if not file_access.exists(path):
        return None
    return json.loads(file_access.read_bytes(path))
