from tfx.types import standard_artifacts

from pipeline.baseline_strategy import BaselineBeforeCandidateStrategy


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
