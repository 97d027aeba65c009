"""The EvaluationReport artifact's evaluation.json read back, without the TFX import of its
writer (components/evaluation/evaluation_report.py): run summaries and the UI read it without
loading TensorFlow."""

from __future__ import annotations

import json
import posixpath

from data_prep.reading import file_access

REPORT_FILE = "evaluation.json"
# EvaluationReport custom property: the test split's accuracy, when the Examples have one.
TEST_ACCURACY_PROPERTY = "test_accuracy"


def read_report(report_uri: str) -> dict | None:
    """evaluation.json of an EvaluationReport artifact (see evaluation_report.build_report for
    its keys); None when its files are gone (a pipeline root cleaned by hand)."""
    path = posixpath.join(report_uri, REPORT_FILE)
    if not file_access.exists(path):
        return None
    return json.loads(file_access.read_bytes(path))


def accuracy_on_test_split(report: dict) -> float | None:
    """The test split's accuracy in a readable evaluation (evaluation.json), or None without a
    test split. Shown beside the eval split's; no decision uses it."""
    test = report.get("test")
    return None if test is None else test["accuracy"]


# Fewer eval images than this (per class, or in all) make an accuracy too noisy to trust: with
# 10 images one mistake moves it by 10 points.
MIN_EVAL_PER_CLASS = 10
MIN_EVAL_IMAGES = 50


def small_eval_warning(report: dict) -> str | None:
    """Why the report's eval split is too small to trust its metrics, or None."""
    supports = {row["class"]: row["support"] for row in report["per_class"]}
    total = sum(supports.values())
    few = sorted(name for name, count in supports.items() if count < MIN_EVAL_PER_CLASS)
    if not few and total >= MIN_EVAL_IMAGES:
        return None
    parts = [f"{total} eval images in all"] if total < MIN_EVAL_IMAGES else []
    parts += [f"{supports[name]} of class {name}" for name in few]
    return (
        f"small eval split ({', '.join(parts)}; want at least {MIN_EVAL_PER_CLASS} per class "
        f"and {MIN_EVAL_IMAGES} in all): its metrics are too noisy to trust; add images or "
        "raise ingest.eval_fraction"
    )
