"""DataHealthGen: a dataset's health in one artifact, linked to its Examples in ML Metadata.

It gathers what the ingest found (near-duplicate clusters, odd images per class: see
data_prep/quality/health.py) and adds the likely label errors among the eval images, found by
cleanlab in the probabilities EvaluationReportGen stored (data_prep/quality/label_issues.py).
Nothing is
removed:
the report names files for a person to look at.

Files: health.json (see build_health for its keys).
"""

import json
import os

from apache_beam.io.filesystems import FileSystems
from tfx.dsl.component.experimental.annotations import InputArtifact, OutputArtifact
from tfx.dsl.component.experimental.decorators import component
from tfx.types import standard_artifacts

from components import metadata_keys
from components.artifacts import DataHealth, EvaluationReport, IngestReport
from components.evaluation import evaluation_report
from components.evaluation.evaluation_report_reader import REPORT_FILE, read_report
from data_prep.ingest import read_ingest_report
from data_prep.quality.label_issues import find_label_issues
from data_prep.writing.ingest_outputs import IngestOutputs

HEALTH_FILE = "health.json"


def build_health(ingest: dict, scores: evaluation_report.EvalScores, labels: list[str]) -> dict:
    """ingest: the ingest report; scores: the eval split's probabilities; labels: class names in
    label-id order."""
    issues = find_label_issues(scores.labels, scores.probabilities, scores.source_paths, labels)
    odd = ingest["odd_images"]
    return {
        "near_duplicates": {**ingest["near_duplicate_share"], "members": ingest["near_duplicates"]},
        "odd_images": {**odd, "count": len(odd["images"])},
        "label_issues": issues,
        "eval_images_checked": int(scores.labels.size),
    }


def counts(health: dict) -> dict[str, int]:
    """The numbers recorded on the artifact (metadata_keys.DATA_HEALTH_COUNTS)."""
    return {
        "near_duplicate_clusters": health["near_duplicates"]["clusters"],
        "near_duplicate_images": health["near_duplicates"]["images"],
        "odd_images": health["odd_images"]["count"],
        "label_issues": len(health["label_issues"]),
        "eval_images_checked": health["eval_images_checked"],
    }


def write_health(health: dict, directory: str) -> None:
    with FileSystems.create(os.path.join(directory, HEALTH_FILE)) as handle:
        handle.write(json.dumps(health, indent=2).encode())


def describe_health(health: dict, data_health: DataHealth) -> None:
    """The counts and the near-duplicate share as the artifact's custom properties."""
    for name, value in counts(health).items():
        data_health.set_int_custom_property(name, value)
    data_health.set_float_custom_property(
        metadata_keys.NEAR_DUPLICATE_FRACTION_PROPERTY, health["near_duplicates"]["fraction"]
    )


def read_health(uri: str) -> dict | None:
    """health.json of a DataHealth artifact; None when its files are gone."""
    path = os.path.join(uri, HEALTH_FILE)
    if not FileSystems.exists(path):
        return None
    with FileSystems.open(path) as handle:
        return json.loads(handle.read())


@component
def DataHealthGen(  # noqa: N802  TFX component names are classes
    examples: InputArtifact[standard_artifacts.Examples],
    ingest_report: InputArtifact[IngestReport],
    readable_evaluation: InputArtifact[EvaluationReport],
    data_health: OutputArtifact[DataHealth],
) -> None:
    """Writes health.json for the Examples the model was trained and evaluated on."""
    del examples  # an input for the lineage: the health belongs to these Examples
    ingest = read_ingest_report(IngestOutputs.under(ingest_report.uri))
    readable = read_report(readable_evaluation.uri)
    if readable is None:
        raise FileNotFoundError(f"no {REPORT_FILE} in {readable_evaluation.uri}")
    health = build_health(
        ingest, evaluation_report.read_scores(readable_evaluation.uri), readable["labels"]
    )
    write_health(health, data_health.uri)
    describe_health(health, data_health)
