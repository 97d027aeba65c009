"""Predictions on labelled files (class folders, or a manifest's label column) scored against
their labels: accuracy, precision and recall per class, and the most confused pairs, as the
readable evaluation computes them (components/evaluation/class_metrics.py)."""

from __future__ import annotations

import dataclasses

import numpy as np

from components.evaluation.class_metrics import (
    confused_pairs,
    confusion_matrix,
    per_class_metrics,
    shown,
)
from pipeline.predictions_file import PredictionRow


@dataclasses.dataclass(frozen=True)
class LabelledScore:
    files: int  # scored files with a label
    correct: int
    per_class: tuple[dict, ...]  # class, precision, recall, f1, support (of known labels)
    most_confused: tuple[dict, ...]  # true, predicted, count, share_of_true_class
    unknown_labels: tuple[str, ...]  # labels that are no class of the model (counted wrong)

    @property
    def accuracy(self) -> float:
        return self.correct / self.files


def score_labelled(rows: list[PredictionRow], label_names: list[str]) -> LabelledScore | None:
    """The scored, labelled rows against their labels; None when no scored row has a label."""
    labelled = [row for row in rows if row.correct is not None]
    if not labelled:
        return None
    index = {name: position for position, name in enumerate(label_names)}
    known = [row for row in labelled if row.label in index]
    matrix = confusion_matrix(
        np.array([index[row.label] for row in known], dtype=np.int64),
        np.array([index[row.top_class] for row in known], dtype=np.int64),
        len(label_names),
    )
    return LabelledScore(
        files=len(labelled),
        correct=sum(bool(row.correct) for row in labelled),
        per_class=tuple(per_class_metrics(matrix, list(label_names))),
        most_confused=tuple(confused_pairs(matrix, list(label_names))),
        unknown_labels=tuple(sorted({row.label for row in labelled} - set(index))),
    )


def format_labelled(score: LabelledScore) -> list[str]:
    """The console's lines: accuracy, per class precision / recall, the most confused pairs."""
    lines = [
        f"labelled: accuracy {score.accuracy:.4f} ({score.correct} of {score.files} scored "
        "files with a label)"
    ]
    if score.unknown_labels:
        lines.append(
            "labels that are no class of the model (counted wrong): "
            + ", ".join(score.unknown_labels)
        )
    lines.append("per class (precision / recall; - where undefined):")
    lines += [
        f"  {row['class']:<20} {shown(row['precision'])} / {shown(row['recall'])}  "
        f"({row['support']} images)"
        for row in score.per_class
    ]
    pairs = ", ".join(
        f"{pair['true']} -> {pair['predicted']} ({pair['count']})" for pair in score.most_confused
    )
    lines.append(f"most confused (true -> predicted): {pairs or 'none'}")
    return lines
