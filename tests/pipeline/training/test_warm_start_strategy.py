"""The Trainer's base model: the newest blessed model made before this run's Examples, so a new
span starts from the last blessed model and an unchanged re-run gets the same base as before."""

import pytest
from tfx.types import standard_artifacts

from pipeline.training import warm_start_strategy
from pipeline.training.warm_start_strategy import BlessedBeforeExamplesStrategy

THREE_CLASSES = {"cat": 0, "dog": 1, "owl": 2}
# Artifact id (Examples or Model) -> the label map the store would answer for it.
LABEL_MAPS = {}


@pytest.fixture(autouse=True)
def label_maps(monkeypatch):
    LABEL_MAPS.clear()
    for name in ("examples_label_map", "model_label_map"):
        monkeypatch.setattr(
            warm_start_strategy.lineage,
            name,
            lambda store, artifact_id: LABEL_MAPS.get(artifact_id, THREE_CLASSES),
        )


def _artifact(kind, artifact_id):
    artifact = kind()
    artifact.id = artifact_id
    return artifact


def _blessing(model_id, blessed):
    blessing = standard_artifacts.ModelBlessing()
    blessing.set_int_custom_property("current_model_id", model_id)
    blessing.set_int_custom_property("blessed", int(blessed))
    return blessing


def _resolve(examples_id, model_ids, blessings):
    return BlessedBeforeExamplesStrategy().resolve_artifacts(
        None,
        {
            "examples": [_artifact(standard_artifacts.Examples, examples_id)],
            "model": [_artifact(standard_artifacts.Model, i) for i in model_ids],
            "model_blessing": blessings,
        },
    )


def test_a_new_span_starts_from_the_newest_blessed_model():
    # Models 3 (blessed) and 5 (not) were trained on earlier spans; Examples 8 are new.
    resolved = _resolve(8, [3, 5], [_blessing(3, True), _blessing(5, False)])
    assert [m.id for m in resolved["model"]] == [3]
    assert resolved["model_blessing"][0].get_int_custom_property("current_model_id") == 3


def test_an_unchanged_rerun_gets_the_base_it_first_had():
    # Examples 2 are cached; model 4 was trained on them (and blessed) by the first run, which
    # had no base: the re-run must not start from model 4, or the Trainer's cache would miss.
    resolved = _resolve(2, [4], [_blessing(4, True)])
    assert resolved["model"] == [] and resolved["model_blessing"] == []
    assert [
        m.id for m in _resolve(6, [3, 7], [_blessing(3, True), _blessing(7, True)])["model"]
    ] == [3]


def test_no_examples_means_no_base():
    resolved = BlessedBeforeExamplesStrategy().resolve_artifacts(
        None, {"examples": [], "model": [], "model_blessing": []}
    )
    assert resolved["model"] == []


def test_among_every_examples_of_the_pipeline_the_newest_is_this_runs():
    # TFX's legacy (Airflow) launcher hands the resolver every Examples ever made: 2 and 6.
    resolved = BlessedBeforeExamplesStrategy().resolve_artifacts(
        None,
        {
            "examples": [_artifact(standard_artifacts.Examples, i) for i in (2, 6)],
            "model": [_artifact(standard_artifacts.Model, i) for i in (4, 7)],
            "model_blessing": [_blessing(4, True), _blessing(7, True)],
        },
    )
    assert [m.id for m in resolved["model"]] == [4]


def test_after_an_allowed_class_change_no_model_of_the_old_classes_is_a_base():
    # Examples 8 hold a fourth class; the blessed models 3 and 5 know three.
    LABEL_MAPS[8] = {**THREE_CLASSES, "fox": 3}
    resolved = _resolve(8, [3, 5], [_blessing(3, True), _blessing(5, True)])
    assert resolved["model"] == [] and resolved["model_blessing"] == []
    # Model 9, trained on the four classes, is the base of the next span's run.
    LABEL_MAPS.update({9: LABEL_MAPS[8], 12: LABEL_MAPS[8]})
    assert [m.id for m in _resolve(12, [3, 5, 9], [_blessing(9, True)])["model"]] == [9]
