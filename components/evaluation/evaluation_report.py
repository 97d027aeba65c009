"""EvaluationReport: the eval split scored by the exported model, in a form a person can read.

TFMA's Evaluator decides the blessing; this report explains the model: per-class precision,
recall and F1, a confusion matrix (numbers and a PNG), the most confused class pairs, and every
misclassified eval image by its source path with what the model answered. It scores the
SavedModel's serving_default signature on the serialized Examples, as TFMA does, and is the one
place outside TFMA where the SavedModel scores the eval split: it keeps every example's
probabilities (eval_scores.npz), which TFLiteExport compares its TFLite models against.

Per-class metrics are defined here only (the run summary, the model card and the UI read them
from this artifact): a value with no defined answer (precision of a class never predicted, recall
of a class with no eval image) is None, null in the JSON, shown as UNDEFINED, never 0.

Each listed mistake gets a Grad-CAM overlay (components/evaluation/gradcam.py) of the class the
model answered: where in the image it found that class.

Files: evaluation.json, confusion_matrix.png, misclassified.csv (all of them, most confident
mistakes first; the JSON lists the first MAX_LISTED), gradcam/<n>.png (the overlay of the n-th
listed mistake, named in its row), eval_scores.npz (labels, probabilities and source paths of
every eval example, in the split's file order).
"""

import csv
import dataclasses
import io
import json
import os

import numpy as np
from apache_beam.io.filesystems import FileSystems
from tfx.dsl.component.experimental.annotations import InputArtifact, OutputArtifact, Parameter
from tfx.dsl.component.experimental.decorators import component
from tfx.types import artifact_utils, standard_artifacts
from tfx.utils import path_utils

from components.artifacts import EvaluationReport
from components.evaluation import gradcam, saved_model_cache
from components.evaluation.class_metrics import (
    confused_pairs,
    confusion_matrix,
    macro_f1,
    per_class_metrics,
)
from components.evaluation.eval_split import read_batches, split_files
from components.evaluation.evaluation_report_reader import (  # noqa: F401
    REPORT_FILE,
    TEST_ACCURACY_PROPERTY,
    read_report,
)
from components.training.export import EXAMPLES_SIGNATURE
from components.training.serving_assets import read_label_names

CONFUSION_PNG = "confusion_matrix.png"
MISCLASSIFIED_CSV = "misclassified.csv"
SCORES_FILE = "eval_scores.npz"
GRADCAM_DIR = "gradcam"
MAX_LISTED = 100
TEST_SPLIT = "test"
MISCLASSIFIED_FIELDS = (
    "source_path",
    "true",
    "predicted",
    "predicted_probability",
    "true_probability",
    "gradcam",  # the overlay's path in the report's folder; empty past the listed mistakes
)


def misclassified(
    labels: np.ndarray, probabilities: np.ndarray, source_paths: list[str], label_names: list[str]
) -> list[dict]:
    """Every wrong answer, the most confident first."""
    predictions = probabilities.argmax(axis=1)
    wrong = np.flatnonzero(predictions != labels)
    rows = [
        {
            "source_path": source_paths[i],
            "true": label_names[labels[i]],
            "predicted": label_names[predictions[i]],
            "predicted_probability": float(probabilities[i, predictions[i]]),
            "true_probability": float(probabilities[i, labels[i]]),
        }
        for i in wrong
    ]
    return sorted(rows, key=lambda row: (-row["predicted_probability"], row["source_path"]))


def build_report(
    label_names: list[str], labels: np.ndarray, probabilities: np.ndarray, source_paths: list[str]
) -> dict:
    classes = len(label_names)
    unknown = labels[(labels < 0) | (labels >= classes)]
    if unknown.size:
        raise ValueError(f"eval labels {sorted(set(unknown.tolist()))} are not model classes")
    matrix = confusion_matrix(labels, probabilities.argmax(axis=1), classes)
    per_class = per_class_metrics(matrix, label_names)
    mistakes = misclassified(labels, probabilities, source_paths, label_names)
    return {
        "examples": int(labels.size),
        "accuracy": float(np.trace(matrix) / max(labels.size, 1)),
        "macro_f1": macro_f1(per_class),
        "per_class": per_class,
        "labels": label_names,
        "confusion_matrix": matrix.tolist(),
        "most_confused": confused_pairs(matrix, label_names),
        "misclassified_count": len(mistakes),
        "misclassified": mistakes,
    }


def confusion_matrix_png(matrix: np.ndarray, label_names: list[str]) -> bytes:
    """A heatmap with counts in the cells, rows = true class, columns = predicted class. Drawn on
    a bare Figure, not pyplot, so the process's matplotlib backend is left alone (a notebook that
    runs the pipeline in its kernel keeps showing its own plots)."""
    from matplotlib.figure import Figure

    side = max(4.0, 0.6 * len(label_names) + 2)
    figure = Figure(figsize=(side, side))
    axes = figure.subplots()
    axes.imshow(matrix, cmap="Blues")
    ticks = range(len(label_names))
    axes.set_xticks(ticks, label_names, rotation=45, ha="right")
    axes.set_yticks(ticks, label_names)
    axes.set_xlabel("predicted")
    axes.set_ylabel("true")
    axes.set_title("confusion matrix (eval split)")
    threshold = matrix.max() / 2 if matrix.size else 0
    for (row, column), count in np.ndenumerate(matrix):
        color = "white" if count > threshold else "black"
        axes.text(column, row, str(count), ha="center", va="center", color=color)
    figure.tight_layout()
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", dpi=100)
    return buffer.getvalue()


@dataclasses.dataclass(frozen=True)
class EvalScores:
    """The SavedModel's answer on every eval example, in the split's file order."""

    labels: np.ndarray  # int64 [n]
    probabilities: np.ndarray  # float32 [n, classes], label-id order
    source_paths: list[str]


def score_split(saved_model_dir: str, files: list[str]) -> EvalScores:
    """Every example in `files`, in file order, scored by the SavedModel's serving_default."""
    serve = saved_model_cache.load(saved_model_dir).model.signatures[EXAMPLES_SIGNATURE]
    labels, probabilities, paths = [], [], []
    for batch in read_batches(files):
        probabilities.append(serve(examples=batch.records)["probabilities"].numpy())
        labels.append(batch.labels)
        paths.extend(batch.source_paths)
    return EvalScores(np.concatenate(labels), np.concatenate(probabilities), paths)


def write_scores(scores: EvalScores, directory: str) -> None:
    buffer = io.BytesIO()
    np.savez_compressed(
        buffer,
        labels=scores.labels,
        probabilities=scores.probabilities,
        source_paths=np.array(scores.source_paths, dtype=str),
    )
    with FileSystems.create(os.path.join(directory, SCORES_FILE)) as handle:
        handle.write(buffer.getvalue())


def read_scores(report_uri: str) -> EvalScores:
    """The per-example scores an EvaluationReport artifact holds."""
    with FileSystems.open(os.path.join(report_uri, SCORES_FILE)) as handle:
        stored = np.load(io.BytesIO(handle.read()), allow_pickle=False)
        return EvalScores(
            stored["labels"], stored["probabilities"], stored["source_paths"].tolist()
        )


def write_report(report: dict, directory: str) -> None:
    """The JSON (first MAX_LISTED mistakes), the CSV (all of them) and the PNG."""
    listed = {**report, "misclassified": report["misclassified"][:MAX_LISTED]}
    with FileSystems.create(os.path.join(directory, REPORT_FILE)) as handle:
        handle.write(json.dumps(listed, indent=2).encode())
    table = io.StringIO()
    writer = csv.DictWriter(table, fieldnames=MISCLASSIFIED_FIELDS)
    writer.writeheader()
    writer.writerows(report["misclassified"])
    with FileSystems.create(os.path.join(directory, MISCLASSIFIED_CSV)) as handle:
        handle.write(table.getvalue().encode())
    png = confusion_matrix_png(np.array(report["confusion_matrix"]), report["labels"])
    with FileSystems.create(os.path.join(directory, CONFUSION_PNG)) as handle:
        handle.write(png)


def explain_mistakes(
    saved_model_dir: str, files: list[str], mistakes: list[dict], directory: str
) -> None:
    """Writes the Grad-CAM overlay of the answered class of each of `mistakes` (rows of
    build_report's list, whose images are in `files`) to GRADCAM_DIR, and names it in the row."""
    if not mistakes:
        return
    wanted = {row["source_path"] for row in mistakes}
    images: dict[str, bytes] = {}
    for batch in read_batches(files):
        for path, image in zip(batch.source_paths, batch.images.numpy(), strict=True):
            if path in wanted:
                images.setdefault(path, image)
        if len(images) == len(wanted):
            break
    explainer = gradcam.Explainer(saved_model_dir)
    explained = explainer.explain(
        [images[row["source_path"]] for row in mistakes],
        [explainer.label_names.index(row["predicted"]) for row in mistakes],
    )
    for index, (row, explanation) in enumerate(zip(mistakes, explained, strict=True)):
        name = f"{GRADCAM_DIR}/{index}.png"
        with FileSystems.create(os.path.join(directory, name)) as handle:
            handle.write(gradcam.overlay(explanation))
        row["gradcam"] = name


def test_split_report(saved_model_dir: str, examples: standard_artifacts.Examples) -> dict | None:
    """The test split's accuracy, macro F1, per-class figures and most confused pairs, when the
    Examples have a test split; None otherwise. Reported beside the eval split's, never used for
    a decision: the Evaluator blesses on the eval split alone."""
    if TEST_SPLIT not in artifact_utils.decode_split_names(examples.split_names):
        return None
    scores = score_split(saved_model_dir, split_files(examples, TEST_SPLIT))
    built = build_report(
        read_label_names(saved_model_dir), scores.labels, scores.probabilities, scores.source_paths
    )
    keys = ("accuracy", "macro_f1", "per_class", "most_confused", "misclassified_count")
    return {**{key: built[key] for key in keys}, "examples": int(scores.labels.size)}


@component
def EvaluationReportGen(  # noqa: N802  TFX component names are classes
    model: InputArtifact[standard_artifacts.Model],
    examples: InputArtifact[standard_artifacts.Examples],
    report: OutputArtifact[EvaluationReport],
    eval_split: Parameter[str] = "eval",
) -> None:
    """Scores `eval_split` with the exported model; writes the readable evaluation, the Grad-CAM
    overlays of the listed mistakes and the per-example scores. When the Examples have a test
    split, it is scored too and reported under 'test' (and the `test_accuracy` property)."""
    saved_model_dir = path_utils.serving_model_path(model.uri)
    files = split_files(examples, eval_split)
    scores = score_split(saved_model_dir, files)
    built = build_report(
        read_label_names(saved_model_dir), scores.labels, scores.probabilities, scores.source_paths
    )
    explain_mistakes(saved_model_dir, files, built["misclassified"][:MAX_LISTED], report.uri)
    test = test_split_report(saved_model_dir, examples)
    if test is not None:
        built["test"] = test
        report.set_float_custom_property(TEST_ACCURACY_PROPERTY, test["accuracy"])
    write_report(built, report.uri)
    write_scores(scores, report.uri)
    report.set_float_custom_property("accuracy", built["accuracy"])
    if built["macro_f1"] is not None:
        report.set_float_custom_property("macro_f1", built["macro_f1"])
    report.set_int_custom_property("misclassified", built["misclassified_count"])
