"""EvaluationReport: the eval split scored by the exported model, in a form a person can read.

TFMA's Evaluator decides the blessing; this report explains the model: per-class precision,
recall and F1, a confusion matrix (numbers and a PNG), the most confused class pairs, and every
misclassified eval image by its source path with what the model answered. It scores the
SavedModel's serving_default signature on the serialized Examples, as TFMA does.

Files: evaluation.json, confusion_matrix.png, misclassified.csv (all of them, most confident
mistakes first; the JSON lists the first MAX_LISTED).
"""

import csv
import io
import json
import os

import numpy as np
import tensorflow as tf
from apache_beam.io.filesystems import FileSystems
from tfx import v1 as tfx
from tfx.types import artifact, standard_artifacts
from tfx.utils import path_utils

from components import metadata_keys
from components.eval_split import read_batches, split_files
from components.trainer.export import EXAMPLES_SIGNATURE
from components.trainer.serving_assets import read_label_names

REPORT_FILE = "evaluation.json"
CONFUSION_PNG = "confusion_matrix.png"
MISCLASSIFIED_CSV = "misclassified.csv"
MAX_LISTED = 100
TOP_PAIRS = 5
MISCLASSIFIED_FIELDS = (
    "source_path",
    "true",
    "predicted",
    "predicted_probability",
    "true_probability",
)


class EvaluationReport(artifact.Artifact):
    """Per-class metrics, confusion matrix and misclassified eval images of one model."""

    TYPE_NAME = metadata_keys.EVALUATION_REPORT_TYPE


def confusion_matrix(labels: np.ndarray, predictions: np.ndarray, classes: int) -> np.ndarray:
    """[true class, predicted class] -> count."""
    flat = np.bincount(labels * classes + predictions, minlength=classes * classes)
    return flat.reshape(classes, classes)


def per_class_metrics(matrix: np.ndarray, label_names: list[str]) -> list[dict]:
    """Precision, recall and F1 per class; 0 where a class was never predicted or never seen."""
    true_positives = np.diag(matrix).astype(float)
    predicted = matrix.sum(axis=0)
    actual = matrix.sum(axis=1)
    precision = np.divide(
        true_positives, predicted, out=np.zeros_like(true_positives), where=predicted > 0
    )
    recall = np.divide(true_positives, actual, out=np.zeros_like(true_positives), where=actual > 0)
    both = precision + recall
    f1 = np.divide(2 * precision * recall, both, out=np.zeros_like(both), where=both > 0)
    return [
        {
            "class": name,
            "precision": float(precision[i]),
            "recall": float(recall[i]),
            "f1": float(f1[i]),
            "support": int(actual[i]),
        }
        for i, name in enumerate(label_names)
    ]


def confused_pairs(matrix: np.ndarray, label_names: list[str], top: int = TOP_PAIRS) -> list[dict]:
    """The largest off-diagonal cells: (true class, predicted class), most frequent first."""
    off_diagonal = matrix.copy()
    np.fill_diagonal(off_diagonal, 0)
    order = np.argsort(-off_diagonal, axis=None, kind="stable")[:top]
    pairs = []
    for true, predicted in zip(*np.unravel_index(order, matrix.shape), strict=True):
        count = int(off_diagonal[true, predicted])
        if count:
            pairs.append(
                {
                    "true": label_names[true],
                    "predicted": label_names[predicted],
                    "count": count,
                    "share_of_true_class": count / int(matrix[true].sum()),
                }
            )
    return pairs


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
        "macro_f1": float(np.mean([row["f1"] for row in per_class])),
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


def score_split(saved_model_dir: str, files: list[str]) -> tuple[np.ndarray, np.ndarray, list[str]]:
    """Labels, probabilities and source paths of every example in `files`, in file order."""
    serve = tf.saved_model.load(saved_model_dir).signatures[EXAMPLES_SIGNATURE]
    labels, probabilities, paths = [], [], []
    for batch in read_batches(files):
        probabilities.append(serve(examples=batch.records)["probabilities"].numpy())
        labels.append(batch.labels)
        paths.extend(batch.source_paths)
    return np.concatenate(labels), np.concatenate(probabilities), paths


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


@tfx.dsl.components.component
def EvaluationReportGen(  # noqa: N802  TFX component names are classes
    model: tfx.dsl.components.InputArtifact[standard_artifacts.Model],
    examples: tfx.dsl.components.InputArtifact[standard_artifacts.Examples],
    report: tfx.dsl.components.OutputArtifact[EvaluationReport],
    eval_split: tfx.dsl.components.Parameter[str] = "eval",
) -> None:
    """Scores `eval_split` with the exported model and writes the readable evaluation."""
    saved_model_dir = path_utils.serving_model_path(model.uri)
    labels, probabilities, paths = score_split(saved_model_dir, split_files(examples, eval_split))
    built = build_report(read_label_names(saved_model_dir), labels, probabilities, paths)
    write_report(built, report.uri)
    report.set_float_custom_property("accuracy", built["accuracy"])
    report.set_float_custom_property("macro_f1", built["macro_f1"])
    report.set_int_custom_property("misclassified", built["misclassified_count"])
