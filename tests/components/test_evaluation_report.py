"""The readable evaluation: exact per-class numbers, confused pairs and misclassified images on a
hand-checked example; and the component on an exported model and an Examples artifact."""

import csv
import io
import json
import os

import numpy as np
import pytest
from PIL import Image

from components import evaluation_report as report
from tests.components.conftest import EVAL_EXAMPLES

NAMES = ["cat", "dog", "emu"]
LABELS = np.array([0, 0, 0, 1, 1, 2])
# Predicted: cat, cat, dog, dog, dog, cat.
PROBABILITIES = np.array(
    [
        [0.8, 0.1, 0.1],
        [0.6, 0.3, 0.1],
        [0.3, 0.6, 0.1],
        [0.1, 0.8, 0.1],
        [0.2, 0.7, 0.1],
        [0.9, 0.05, 0.05],
    ]
)
PATHS = [f"img{i}.jpg" for i in range(6)]


def test_confusion_matrix_and_per_class_metrics():
    matrix = report.confusion_matrix(LABELS, PROBABILITIES.argmax(1), 3)
    np.testing.assert_array_equal(matrix, [[2, 1, 0], [0, 2, 0], [1, 0, 0]])

    rows = {row["class"]: row for row in report.per_class_metrics(matrix, NAMES)}

    assert rows["cat"]["precision"] == pytest.approx(2 / 3)
    assert rows["cat"]["recall"] == pytest.approx(2 / 3)
    assert rows["cat"]["f1"] == pytest.approx(2 / 3)
    assert rows["dog"]["precision"] == pytest.approx(2 / 3)
    assert rows["dog"]["recall"] == 1.0
    assert rows["dog"]["f1"] == pytest.approx(0.8)
    # Never predicted, never right: zeros, not a division error.
    assert rows["emu"] == {"class": "emu", "precision": 0.0, "recall": 0.0, "f1": 0.0, "support": 1}


def test_confused_pairs_and_misclassified_images():
    built = report.build_report(NAMES, LABELS, PROBABILITIES, PATHS)

    assert built["accuracy"] == pytest.approx(4 / 6)
    assert built["most_confused"] == [
        {
            "true": "cat",
            "predicted": "dog",
            "count": 1,
            "share_of_true_class": pytest.approx(1 / 3),
        },
        {"true": "emu", "predicted": "cat", "count": 1, "share_of_true_class": 1.0},
    ]
    assert built["misclassified_count"] == 2
    # The most confident mistake first.
    assert [row["source_path"] for row in built["misclassified"]] == ["img5.jpg", "img2.jpg"]
    assert built["misclassified"][0] == {
        "source_path": "img5.jpg",
        "true": "emu",
        "predicted": "cat",
        "predicted_probability": pytest.approx(0.9),
        "true_probability": pytest.approx(0.05),
    }


def test_labels_outside_the_model_are_a_clear_error():
    with pytest.raises(ValueError, match=r"eval labels \[3\] are not model classes"):
        report.build_report(NAMES, np.array([0, 3]), PROBABILITIES[:2], PATHS[:2])


def test_confusion_matrix_png_is_an_image():
    matrix = report.confusion_matrix(LABELS, PROBABILITIES.argmax(1), 3)
    image = Image.open(io.BytesIO(report.confusion_matrix_png(matrix, NAMES)))
    assert image.format == "PNG" and min(image.size) >= 300


@pytest.mark.slow
def test_component_scores_every_eval_example_and_names_the_mistakes(
    model_artifact, examples_artifact, tmp_path
):
    output = report.EvaluationReport()
    output.uri = str(tmp_path)
    report.EvaluationReportGen.EXECUTOR_SPEC.executor_class().Do(
        {"model": [model_artifact], "examples": [examples_artifact]},
        {"report": [output]},
        {"eval_split": "eval"},
    )

    with open(tmp_path / report.REPORT_FILE) as handle:
        written = json.load(handle)
    assert sum(row["support"] for row in written["per_class"]) == EVAL_EXAMPLES
    assert np.array(written["confusion_matrix"]).sum() == EVAL_EXAMPLES
    with open(tmp_path / report.MISCLASSIFIED_CSV) as handle:
        mistakes = list(csv.DictReader(handle))
    assert (
        len(mistakes)
        == written["misclassified_count"]
        == output.get_int_custom_property("misclassified")
    )
    assert mistakes  # an untrained model gets most of 3 balanced classes wrong
    # Source paths come from the Examples (the conftest writes '<label>/<index>.jpg').
    assert all(row["source_path"].startswith(f"{row['true']}/") for row in mistakes)
    assert os.path.getsize(tmp_path / report.CONFUSION_PNG) > 0
