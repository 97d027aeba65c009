"""The pipeline config file: the shipped example loads, `config show` round-trips, and every
error names the file, the field and the value."""

import dataclasses
import pathlib

import pytest
import yaml

from data_prep.contract.config_error import ConfigError
from pipeline.cli import main
from pipeline.config import config_file
from pipeline.config.pipeline_config import local_preset

EXAMPLE = str(pathlib.Path(__file__).parents[3] / "pipeline" / "example.yaml")


def _load(path, data="images"):
    return config_file.apply_settings(
        local_preset(data), config_file.read_settings(str(path)), str(path)
    )


def test_the_shipped_example_sets_its_fields_and_keeps_the_preset_elsewhere():
    config = _load(EXAMPLE)
    assert (config.name, config.min_accuracy, config.schedule) == ("flowers", 0.85, "0 3 * * *")
    assert (config.trainer.image_size, config.trainer.epochs) == (96, 20)
    assert config.ingest.limits.max_side == 512
    assert config.ingest.eval_fraction == 0.15
    preset = local_preset("images")
    assert config.trainer.batch_size == preset.trainer.batch_size
    assert config.beam_args == preset.beam_args


def test_config_show_prints_a_file_that_loads_back_to_the_same_config(tmp_path, capsys):
    code = main(
        ["config", "show", "--config", EXAMPLE, "--data", "images", "--set", "trainer.epochs=3"]
    )
    assert code == 0
    shown = capsys.readouterr().out
    path = tmp_path / "shown.yaml"
    path.write_text(shown)
    # The epochs set on the command line are obeyed as set (not stretched), and so is shown.
    trainer = dataclasses.replace(_load(EXAMPLE).trainer, epochs=3, stretch_epochs=False)
    expected = dataclasses.replace(_load(EXAMPLE), trainer=trainer)
    assert _load(path, data="elsewhere") == expected
    # Every field is there, defaults included, tuples as lists, None as null.
    settings = yaml.safe_load(shown)
    assert settings["trainer"]["profile_steps"] is None
    assert settings["beam_args"] == list(expected.beam_args)


def test_a_toml_file_loads_like_yaml(tmp_path):
    path = tmp_path / "pipeline.toml"
    path.write_text('name = "flowers"\n[trainer]\nepochs = 4\n')
    config = _load(path)
    assert (config.name, config.trainer.epochs) == ("flowers", 4)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("trainer:\n  epochs: many\n", "trainer.epochs: 'many' is not of type int"),
        ("trainer:\n  epochs: 0\n", "trainer.epochs: "),  # a range error from validate()
        ("min_accuracy: 2\n", "min_accuracy: 2.0 is not between 0 and 1"),
        ("trainer:\n  epoch: 3\n", "trainer.epoch: unknown setting"),
        ("name: [unclosed\n", "is not valid YAML"),
        ("- a list\n", "must be a mapping of settings, not list"),
    ],
)
def test_errors_name_the_file_the_field_and_the_value(tmp_path, text, message):
    path = tmp_path / "pipeline.yaml"
    path.write_text(text)
    with pytest.raises(ConfigError) as raised:
        _load(path)
    assert str(raised.value).startswith(f"{path}: ")
    assert message in str(raised.value)


def test_a_bad_config_file_fails_the_run_before_any_work(tmp_path, capsys):
    path = tmp_path / "pipeline.yaml"
    path.write_text("trainer:\n  epochs: many\n")
    code = main(["run", "--config", str(path), "--build-dir", str(tmp_path / "build")])
    assert code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [f"imgpipe run: error: {path}: trainer.epochs: 'many' is not of type int"]
    assert not (tmp_path / "build").exists()


def test_set_overrides_the_file_and_data_overrides_its_input(tmp_path, capsys):
    path = tmp_path / "pipeline.yaml"
    path.write_text("ingest:\n  input: from-file\ntrainer:\n  epochs: 4\n")
    main(["config", "show", "--config", str(path), "--set", "trainer.epochs=6"])
    shown = yaml.safe_load(capsys.readouterr().out)
    assert (shown["ingest"]["input"], shown["trainer"]["epochs"]) == ("from-file", 6)
    main(["config", "show", "--config", str(path), "--data", "from-flag"])
    assert yaml.safe_load(capsys.readouterr().out)["ingest"]["input"] == "from-flag"


def test_flags_beat_the_config_file_which_beats_the_preset(tmp_path, capsys):
    """`config show > my.yaml`, then `--config my.yaml --build-dir elsewhere` uses elsewhere."""
    assert main(["config", "show", "--build-dir", str(tmp_path / "first")]) == 0
    shown = tmp_path / "my.yaml"
    shown.write_text(capsys.readouterr().out.replace("  epochs: 30\n", "  epochs: 7\n"))
    elsewhere = tmp_path / "elsewhere"
    argv = ["--config", str(shown), "--build-dir", str(elsewhere), "--data", "photos"]
    assert main(["config", "show", *argv, "--set", "name=flowers"]) == 0
    config = yaml.safe_load(capsys.readouterr().out)
    assert config["pipeline_root"] == str(elsewhere / "tfx")
    assert config["metadata_path"] == str(elsewhere / "tfx" / "metadata.db")
    assert config["serving_dir"] == str(elsewhere / "serving")
    assert config["ingest"]["input"] == "photos"
    assert config["name"] == "flowers"
    assert config["trainer"]["epochs"] == 7

    assert main(["config", "show", *argv, "--set", "name=flowers", "--origins"]) == 0
    origins = {
        line.split()[0]: line.split("(", 1)[1].rstrip(")")
        for line in capsys.readouterr().out.splitlines()
    }
    assert origins["pipeline_root"] == origins["serving_dir"] == "--build-dir"
    assert origins["ingest.input"] == "--data"
    assert origins["name"] == "--set name=flowers"
    assert origins["trainer.epochs"] == f"config file {shown}"
    assert origins["gate.image_size_share"] == f"config file {shown}"  # show wrote every field
    assert main(["config", "show", "--origins"]) == 0
    assert "(preset local)" in capsys.readouterr().out
