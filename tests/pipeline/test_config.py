import dataclasses

import pytest

from data_prep.config import ConfigError
from pipeline.config import PRESETS, local_preset


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


@pytest.mark.parametrize("schedule", [None, "@daily", "@hourly", "0 3 * * *", "*/15 0-6 * * MON"])
def test_schedules_airflow_understands_are_accepted(schedule):
    assert dataclasses.replace(local_preset("images/"), schedule=schedule).validate()
