import pytest
from tfx.types import standard_artifacts

from pipeline.validation import baseline_strategy
from pipeline.validation.baseline_strategy import (
    BaselineBeforeCandidateStrategy,
    BlessedTrainingStatisticsStrategy,
)

THREE_CLASSES = {"cat": 0, "dog": 1, "owl": 2}
# Model id -> the label map of its training data (what the store would answer).
LABEL_MAPS = {}


@pytest.fixture(autouse=True)
def label_maps(monkeypatch):
    LABEL_MAPS.clear()
    monkeypatch.setattr(
        baseline_strategy.lineage,
        "model_label_map",
        lambda store, model_id: LABEL_MAPS.get(model_id, THREE_CLASSES),
    )


def _model(artifact_id):
    model = standard_artifacts.Model()
    model.id = artifact_id
    return model


def _blessing(model_id, blessed):
    blessing = standard_artifacts.ModelBlessing()
    blessing.set_int_custom_property("current_model_id", model_id)
    blessing.set_int_custom_property("blessed", int(blessed))
    return blessing


def _resolve(candidate_id, model_ids, blessings):
    models = [_model(i) for i in model_ids]
    candidate = [m for m in models if m.id == candidate_id]
    return BaselineBeforeCandidateStrategy().resolve_artifacts(
        None, {"candidate": candidate, "model": models, "model_blessing": blessings}
    )


def test_baseline_is_the_newest_blessed_model_older_than_the_candidate():
    blessings = [_blessing(1, True), _blessing(2, True), _blessing(3, False)]
    resolved = _resolve(4, [1, 2, 3, 4], blessings)
    assert [m.id for m in resolved["model"]] == [2]
    assert resolved["model_blessing"][0].get_int_custom_property("current_model_id") == 2


def test_a_cached_candidate_keeps_the_baseline_it_was_first_evaluated_against():
    # Model 2 was blessed when evaluated against model 1; re-running with the cached model 2
    # must not make model 2 its own baseline.
    blessings = [_blessing(1, True), _blessing(2, True)]
    assert [m.id for m in _resolve(2, [1, 2], blessings)["model"]] == [1]


def test_no_older_blessed_model_means_no_baseline():
    resolved = _resolve(1, [1], [_blessing(1, True)])
    assert resolved["model"] == [] and resolved["model_blessing"] == []
    assert [m.id for m in resolved["candidate"]] == [1]


def test_only_the_newest_candidate_is_returned():
    # TFX's Airflow runner passes every model of the pipeline as candidates; returning an older
    # one beside the baseline would make it two outputs of one execution, which MLMD refuses.
    models = [_model(i) for i in (1, 2)]
    resolved = BaselineBeforeCandidateStrategy().resolve_artifacts(
        None,
        {"candidate": models, "model": models, "model_blessing": [_blessing(1, True)]},
    )
    assert [m.id for m in resolved["candidate"]] == [2]
    assert [m.id for m in resolved["model"]] == [1]


def test_a_baseline_with_another_label_map_is_never_returned():
    LABEL_MAPS[3] = {**THREE_CLASSES, "fox": 3}  # the candidate has a new class
    resolved = _resolve(3, [1, 2, 3], [_blessing(1, True), _blessing(2, True)])
    assert resolved["model"] == [] and resolved["model_blessing"] == []
    assert [m.id for m in resolved["candidate"]] == [3]


def _statistics(artifact_id):
    statistics = standard_artifacts.ExampleStatistics()
    statistics.id = artifact_id
    return statistics


@pytest.fixture
def trained_on(monkeypatch):
    """Model id -> the id of its training data's statistics, as the store would answer."""
    statistics_of_model = {}
    monkeypatch.setattr(baseline_strategy.lineage, "training_examples_id", lambda s, m: m)
    monkeypatch.setattr(
        baseline_strategy.lineage,
        "examples_statistics_id",
        lambda store, examples_id: statistics_of_model.get(examples_id),
    )
    monkeypatch.setattr(baseline_strategy, "_artifact", lambda store, i: _statistics(i))
    return statistics_of_model


def _drift_baseline(current, model_ids, blessings):
    resolved = BlessedTrainingStatisticsStrategy().resolve_artifacts(
        None,
        {
            "statistics": [_statistics(current)],
            "model": [_model(i) for i in model_ids],
            "model_blessing": blessings,
        },
    )
    return [s.id for s in resolved["statistics"]]


def test_drift_baseline_is_the_newest_blessed_models_training_statistics(trained_on):
    trained_on.update({1: 10, 2: 20, 3: 30})
    blessings = [_blessing(1, True), _blessing(2, True), _blessing(3, False)]
    assert _drift_baseline(40, [1, 2, 3], blessings) == [20]


def test_a_span_checked_again_keeps_its_first_drift_baseline(trained_on):
    # Model 2 was trained on statistics 20 and blessed; re-running that span (statistics 20)
    # compares it with model 1's data, as the first time, never with itself.
    trained_on.update({1: 10, 2: 20})
    assert _drift_baseline(20, [1, 2], [_blessing(1, True), _blessing(2, True)]) == [10]


def test_no_blessed_model_means_no_drift_baseline(trained_on):
    trained_on.update({1: 10})
    assert _drift_baseline(20, [1], [_blessing(1, False)]) == []


def test_the_drift_baseline_comes_with_its_datas_ingest_report(trained_on, monkeypatch):
    # The report ImageExampleGen wrote beside model 2's training examples (examples id 2 here).
    monkeypatch.setattr(
        baseline_strategy.lineage,
        "ingest_report_artifact",
        lambda store, examples_id: _statistics(examples_id + 100),
    )
    trained_on.update({1: 10, 2: 20})
    inputs = {
        "statistics": [_statistics(30)],
        "model": [_model(1), _model(2)],
        "model_blessing": [_blessing(1, True), _blessing(2, True)],
    }
    strategy = BlessedTrainingStatisticsStrategy()
    resolved = strategy.resolve_artifacts(None, {**inputs, "ingest_report": []})
    assert [r.id for r in resolved["ingest_report"]] == [102]
    assert "ingest_report" not in strategy.resolve_artifacts(None, inputs)
    first_span = strategy.resolve_artifacts(
        None, {**inputs, "model_blessing": [], "ingest_report": []}
    )
    assert first_span["ingest_report"] == [] and first_span["statistics"] == []
