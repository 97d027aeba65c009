"""Predictions scored against their labels: accuracy, per-class precision and recall, the most
confused pairs, and labels the model does not know counted wrong."""

from pipeline.predictions_file import REJECTED, SCORED, PredictionRow
from pipeline.serving.labelled import format_labelled, score_labelled

NAMES = ["cat", "dog", "emu"]


def _row(label: str, predicted: str, status: str = SCORED) -> PredictionRow:
    top_k = ((predicted, 0.9),) if status == SCORED else ()
    return PredictionRow(f"/{label}/{predicted}.jpg", status, top_k=top_k, label=label)


def test_labelled_rows_are_scored_against_their_labels():
    rows = [
        _row("cat", "cat"),
        _row("cat", "dog"),
        _row("dog", "dog"),
        _row("dog", "dog"),
        _row("owl", "emu"),  # a label the model does not know
        _row("emu", "", status=REJECTED),  # not scored: left out
        PredictionRow("/x.jpg", SCORED, top_k=(("cat", 0.8),)),  # no label: left out
    ]
    assert [row.correct for row in rows] == [True, False, True, True, False, None, None]

    score = score_labelled(rows, NAMES)

    assert (score.files, score.correct, score.accuracy) == (5, 3, 0.6)
    assert score.unknown_labels == ("owl",)
    by_class = {row["class"]: row for row in score.per_class}
    assert (by_class["cat"]["precision"], by_class["cat"]["recall"]) == (1.0, 0.5)
    assert (by_class["dog"]["precision"], by_class["dog"]["recall"]) == (2 / 3, 1.0)
    assert by_class["emu"]["precision"] is None and by_class["emu"]["recall"] is None
    assert [(p["true"], p["predicted"], p["count"]) for p in score.most_confused] == [
        ("cat", "dog", 1)
    ]
    lines = format_labelled(score)
    assert lines[0] == "labelled: accuracy 0.6000 (3 of 5 scored files with a label)"
    assert lines[1] == "labels that are no class of the model (counted wrong): owl"
    assert "  cat                  1.000 / 0.500  (2 images)" in lines
    assert "  emu                  - / -  (0 images)" in lines
    assert lines[-1] == "most confused (true -> predicted): cat -> dog (1)"


def test_rows_without_labels_are_no_labelled_evaluation():
    rows = [PredictionRow("/x.jpg", SCORED, top_k=(("cat", 0.8),))]
    assert score_labelled(rows, NAMES) is None
