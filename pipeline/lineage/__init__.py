"""Answers from ML Metadata, one subject per module: store (the graph walks rest on), run_contexts
(which runs a store holds, whoever orchestrated them), runs (one record per run), models
(upstream and downstream lineage), diff (what changed between runs), images (which datasets used
an image), predictions (which models scored an image) and metrics (TFMA readers). Results are
plain dataclasses (JSON via dataclasses.asdict); pipeline/lineage/formatting.py turns them into
tables. This package's public names are re-exported here for callers that ask one question."""

from pipeline.lineage.diff import Change, RunDiff, diff_runs, run_facts
from pipeline.lineage.images import ImageLineage, ImageMatch, image_lineage
from pipeline.lineage.metrics import eval_accuracy, validation_failures
from pipeline.lineage.models import (
    Dataset,
    Evaluation,
    ExamplesLineage,
    ModelLineage,
    TrainedModel,
    examples_label_map,
    examples_lineage,
    examples_source_index,
    examples_statistics_id,
    find_model,
    ingest_report_artifact,
    latest_pushed_model,
    model_label_map,
    model_lineage,
    producer_of,
    training_examples_id,
)
from pipeline.lineage.predictions import PredictionsLineage, Scoring, predictions_lineage
from pipeline.lineage.predictions_edits import PredictionsFileLineage, predictions_file_lineage
from pipeline.lineage.runs import (
    STOPPED_BY_EVALUATOR,
    STOPPED_BY_GATE,
    STOPPED_BY_SERVING_CHECK,
    ComponentRun,
    PipelineRun,
    find_run,
    list_runs,
    run_artifacts,
    run_executions,
    run_record,
)
from pipeline.lineage.store import ArtifactRecord, Edge, ExecutionRecord, LineageError

__all__ = [
    "STOPPED_BY_EVALUATOR",
    "STOPPED_BY_GATE",
    "STOPPED_BY_SERVING_CHECK",
    "ArtifactRecord",
    "Change",
    "ComponentRun",
    "Dataset",
    "Edge",
    "Evaluation",
    "ExamplesLineage",
    "ExecutionRecord",
    "ImageLineage",
    "ImageMatch",
    "LineageError",
    "ModelLineage",
    "PipelineRun",
    "PredictionsFileLineage",
    "PredictionsLineage",
    "RunDiff",
    "Scoring",
    "TrainedModel",
    "diff_runs",
    "eval_accuracy",
    "examples_label_map",
    "examples_lineage",
    "examples_source_index",
    "examples_statistics_id",
    "find_model",
    "find_run",
    "image_lineage",
    "ingest_report_artifact",
    "latest_pushed_model",
    "list_runs",
    "model_label_map",
    "model_lineage",
    "predictions_file_lineage",
    "predictions_lineage",
    "producer_of",
    "run_artifacts",
    "run_executions",
    "run_facts",
    "run_record",
    "training_examples_id",
    "validation_failures",
]
