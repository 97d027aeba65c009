import dataclasses

import pytest

from data_prep.contract.config_error import ConfigError
from pipeline.config.pipeline_config import (
    PRESETS,
    check_data_fits,
    local_preset,
    override,
    with_absolute_paths,
)


@pytest.mark.parametrize("preset", sorted(PRESETS))
def test_presets_are_valid_and_keep_state_under_the_build_dir(preset):
    config = PRESETS[preset]("images/", "somewhere").validate()
    assert config.ingest.input == "images/"
    for path in (config.pipeline_root, config.metadata_path, config.serving_dir):
        assert path.startswith("somewhere/")


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"name": "Bad Name!"}, "name"),
        ({"pipeline_root": ""}, "pipeline_root"),
        ({"metadata_path": ""}, "metadata_path"),
        ({"schedule": "daily"}, "schedule"),
        ({"schedule": "@fortnightly"}, "schedule"),
        ({"schedule": "0 3 * *"}, "schedule"),
        ({"int8_max_accuracy_gap_points": -0.5}, "int8_max_accuracy_gap_points"),
    ],
)
def test_bad_values_fail_naming_the_field(change, field):
    with pytest.raises(ConfigError) as error:
        dataclasses.replace(local_preset("images/"), **change).validate()
    assert error.value.field == field


def test_nested_ingest_errors_name_the_full_path():
    config = local_preset("images/")
    bad = dataclasses.replace(config, ingest=dataclasses.replace(config.ingest, eval_fraction=2))
    with pytest.raises(ConfigError, match=r"^ingest.eval_fraction: 2 is not between 0 and 1"):
        bad.validate()


@pytest.mark.parametrize(
    ("setting", "path", "expected"),
    [
        ("trainer.epochs=5", ("trainer", "epochs"), 5),
        ("trainer.precision=mixed_bfloat16", ("trainer", "precision"), "mixed_bfloat16"),
        ("trainer.jit_compile=true", ("trainer", "jit_compile"), True),
        ("trainer.jit_compile=null", ("trainer", "jit_compile"), None),
        ("trainer.profile_steps=[2, 4]", ("trainer", "profile_steps"), (2, 4)),
        ("trainer.learning_rate=1", ("trainer", "learning_rate"), 1.0),
        ("min_accuracy=0.8", ("min_accuracy",), 0.8),
        ("name=2026", ("name",), "2026"),
        ("ingest.max_reject_fraction=0.2", ("ingest", "max_reject_fraction"), 0.2),
        ("gate.allow_class_changes=true", ("gate", "allow_class_changes"), True),
        ("gate.image_size_share=0.5", ("gate", "image_size_share"), 0.5),
    ],
)
def test_override_sets_one_typed_field_and_leaves_the_rest(setting, path, expected):
    config = local_preset("images/")
    changed = override(config, setting)
    value = changed
    for name in path:
        value = getattr(value, name)
    assert value == expected and type(value) is type(expected)
    assert dataclasses.replace(changed, **{path[0]: getattr(config, path[0])}) == config


@pytest.mark.parametrize(
    ("setting", "field"),
    [
        ("trainer.epochs=five", "trainer.epochs"),
        ("trainer.epochs=true", "trainer.epochs"),
        ("trainer.jit_compile=maybe", "trainer.jit_compile"),
        ("trainer.nope=1", "trainer.nope"),
        ("min_accuracy.x=1", "min_accuracy.x"),
        ("epochs", "epochs"),
    ],
)
def test_override_rejects_bad_settings_naming_the_field(setting, field):
    with pytest.raises(ConfigError) as error:
        override(local_preset("images/"), setting)
    assert error.value.field == field


def test_an_override_out_of_range_fails_validation_naming_the_nested_field():
    with pytest.raises(ConfigError) as error:
        override(local_preset("images/"), "trainer.epochs=0").validate()
    assert error.value.field == "trainer.epochs"


@pytest.mark.parametrize("schedule", [None, "@daily", "@hourly", "0 3 * * *", "*/15 0-6 * * MON"])
def test_schedules_airflow_understands_are_accepted(schedule):
    assert dataclasses.replace(local_preset("images/"), schedule=schedule).validate()


@pytest.mark.parametrize(
    ("setting", "field"),
    [
        ("gate.class_distribution_linf=0", "gate.class_distribution_linf"),
        ("gate.image_format_linf=1.5", "gate.image_format_linf"),
        ("gate.image_size_share=-0.1", "gate.image_size_share"),
        ("gate.max_near_duplicate_fraction=1.5", "gate.max_near_duplicate_fraction"),
        ("ingest.near_duplicate_max_distance=40", "ingest.near_duplicate_max_distance"),
    ],
)
def test_drift_thresholds_out_of_range_fail_naming_the_field(setting, field):
    with pytest.raises(ConfigError) as error:
        override(local_preset("images/"), setting).validate()
    assert error.value.field == field


def test_with_absolute_paths_resolves_local_paths_and_keeps_uris(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    config = with_absolute_paths(
        dataclasses.replace(local_preset("photos", "build"), serving_dir="gs://bucket/serving")
    )
    assert config.ingest.input == str(tmp_path / "photos")
    assert config.pipeline_root == str(tmp_path / "build" / "tfx")
    assert config.metadata_path == str(tmp_path / "build" / "tfx" / "metadata.db")
    assert config.serving_dir == "gs://bucket/serving"


def test_too_little_data_for_a_batch_names_a_batch_that_fits():
    config = local_preset("images")
    check_data_fits(config, files=80)  # 64 training examples: one batch of 64
    with pytest.raises(ConfigError) as raised:
        check_data_fits(config, files=18)
    assert str(raised.value) == (
        "trainer.batch_size: 18 labelled images in images give about 14 training examples "
        "(80%), fewer than one batch of 64; use a smaller batch (--set trainer.batch_size=8) "
        "or add images"
    )
    accumulated = dataclasses.replace(
        config, trainer=dataclasses.replace(config.trainer, gradient_accumulation_steps=2)
    )
    with pytest.raises(ConfigError, match="one accumulated step of 128; .*batch_size=32"):
        check_data_fits(accumulated, files=80)


def test_augmentation_is_a_setting_checked_like_the_others():
    config = override(local_preset("images"), "trainer.augment.flip=false")
    assert config.trainer.augment.flip is False
    assert config.trainer.augment.crop == local_preset("images").trainer.augment.crop
    with pytest.raises(ConfigError, match=r"^trainer.augment.crop: 0.0 is not in \(0, 1\]"):
        override(local_preset("images"), "trainer.augment.crop=0").validate()
