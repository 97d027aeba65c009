"""Per-class figures of a classifier from its true and predicted class ids: the confusion matrix,
precision, recall and F1 per class, the most confused pairs. NumPy only, so `imgpipe predict`
and the run summary use them without loading TFX; the readable evaluation
(evaluation_report.py) is built on them.

A metric with no defined value (precision of a class never predicted, recall of a class with no
image) is None, shown as UNDEFINED, never 0.
"""

from __future__ import annotations

import numpy as np

UNDEFINED = "-"  # how a metric with no defined value (None) is shown
TOP_PAIRS = 5


def confusion_matrix(labels: np.ndarray, predictions: np.ndarray, classes: int) -> np.ndarray:
    """[true class, predicted class] -> count."""
    flat = np.bincount(labels * classes + predictions, minlength=classes * classes)
    return flat.reshape(classes, classes)


def _ratio(numerator: float, denominator: float) -> float | None:
    return float(numerator / denominator) if denominator > 0 else None


def per_class_metrics(matrix: np.ndarray, label_names: list[str]) -> list[dict]:
    """Precision, recall and F1 per class; None where undefined: precision of a class never
    predicted, recall of a class with no eval image, F1 of a class neither seen nor predicted
    (F1 = 2TP / (2TP + FP + FN): 0 for a class seen but never predicted, as it has no hits)."""
    rows = []
    for i, name in enumerate(label_names):
        true_positives = float(matrix[i, i])
        predicted, actual = float(matrix[:, i].sum()), float(matrix[i].sum())
        rows.append(
            {
                "class": name,
                "precision": _ratio(true_positives, predicted),
                "recall": _ratio(true_positives, actual),
                "f1": _ratio(2 * true_positives, predicted + actual),
                "support": int(actual),
            }
        )
    return rows


def macro_f1(per_class: list[dict]) -> float | None:
    """The mean F1 over the classes whose F1 is defined; None when none is."""
    defined = [row["f1"] for row in per_class if row["f1"] is not None]
    return float(np.mean(defined)) if defined else None


def shown(value: float | None, digits: int = 3) -> str:
    """A metric for people: UNDEFINED for None, else rounded to `digits`."""
    return UNDEFINED if value is None else f"{value:.{digits}f}"


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
