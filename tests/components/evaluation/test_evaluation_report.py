"""The readable evaluation: exact per-class numbers, confused pairs and misclassified images on a
hand-checked example; and the component on an exported model and an Examples artifact."""

import csv
import io
import json
import os
import shutil

import numpy as np
import pytest
from PIL import Image
from tfx.types import standard_artifacts

from components.evaluation import evaluation_report as report
from components.evaluation.class_metrics import shown
from components.evaluation.evaluation_report_reader import accuracy_on_test_split
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
    # Never predicted: no precision (None, not 0); seen once and missed: recall and F1 are 0.
    assert rows["emu"] == {
        "class": "emu",
        "precision": None,
        "recall": 0.0,
        "f1": 0.0,
        "support": 1,
    }


def test_an_undefined_metric_is_none_in_the_report_null_in_its_json_and_shown_as_a_dash(tmp_path):
    names = [*NAMES, "yak"]  # a class with no eval image that the model never predicts
    built = report.build_report(names, LABELS, np.pad(PROBABILITIES, ((0, 0), (0, 1))), PATHS)

    yak = built["per_class"][3]
    assert yak == {"class": "yak", "precision": None, "recall": None, "f1": None, "support": 0}
    # The macro F1 averages the classes whose F1 is defined.
    assert built["macro_f1"] == pytest.approx((2 / 3 + 0.8 + 0.0) / 3)
    report.write_report(built, str(tmp_path))
    with open(tmp_path / report.REPORT_FILE) as handle:
        assert json.load(handle)["per_class"][3]["recall"] is None
    assert report.read_report(str(tmp_path))["per_class"][3] == yak
    assert [shown(yak[key]) for key in ("precision", "recall", "f1")] == ["-"] * 3
    assert shown(2 / 3) == "0.667"


def test_a_report_whose_files_are_gone_reads_as_none(tmp_path):
    assert report.read_report(str(tmp_path)) is None


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
    # Each listed mistake has its Grad-CAM overlay, a PNG named in its row of the JSON and CSV.
    listed = written["misclassified"]
    assert [row["gradcam"] for row in listed] == [f"gradcam/{i}.png" for i in range(len(listed))]
    assert [row["gradcam"] for row in mistakes[: len(listed)]] == [r["gradcam"] for r in listed]
    for row in listed:
        with Image.open(tmp_path / row["gradcam"]) as overlay:
            assert overlay.format == "PNG" and overlay.size == (160, 160)
    # Every example's scores are kept, in the split's order, for TFLiteExport to compare with.
    scores = report.read_scores(str(tmp_path))
    assert scores.probabilities.shape == (EVAL_EXAMPLES, 3) == (len(scores.source_paths), 3)
    np.testing.assert_allclose(scores.probabilities.sum(axis=1), 1.0, rtol=1e-5)
    assert float(np.mean(scores.probabilities.argmax(1) == scores.labels)) == written["accuracy"]
    assert len(set(scores.source_paths)) == EVAL_EXAMPLES
    assert "test" not in written  # no test split in these Examples


@pytest.mark.slow
def test_a_test_split_is_scored_beside_the_eval_split(model_artifact, examples_artifact, tmp_path):
    """The same shards as eval and test: the same figures, reported under 'test' and as the
    report's test_accuracy property."""
    examples = standard_artifacts.Examples()
    examples.uri = str(tmp_path / "examples")
    examples.split_names = '["eval", "test"]'
    for split in ("eval", "test"):
        shutil.copytree(
            os.path.join(examples_artifact.uri, "Split-eval"),
            tmp_path / "examples" / f"Split-{split}",
        )
    output = report.EvaluationReport()
    output.uri = str(tmp_path / "report")
    os.makedirs(output.uri)
    report.EvaluationReportGen.EXECUTOR_SPEC.executor_class().Do(
        {"model": [model_artifact], "examples": [examples]}, {"report": [output]}, {}
    )

    written = report.read_report(output.uri)
    test = written["test"]
    assert test["examples"] == EVAL_EXAMPLES
    assert test["accuracy"] == written["accuracy"] == accuracy_on_test_split(written)
    assert test["per_class"] == written["per_class"]
    assert output.get_float_custom_property(report.TEST_ACCURACY_PROPERTY) == test["accuracy"]
