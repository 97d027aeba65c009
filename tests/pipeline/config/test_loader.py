import pytest

from components.training.trainer_config import (
    IMAGENET_FINE_TUNE_LEARNING_RATE,
    LITE0_IMAGENET_IMAGE_SIZE,
    TrainerConfig,
    runlocal,
)
from data_prep.contract.config_error import ConfigError
from pipeline.config.loader import Override, build_dir_overrides, load_config


def _file(tmp_path, text):
    path = tmp_path / "imgpipe.yaml"
    path.write_text(text)
    return str(path)


def test_each_layer_beats_the_one_before_and_says_where_each_setting_came_from(tmp_path):
    file = _file(tmp_path, "name: birds\ntrainer:\n  epochs: 3\n  seed: 16\n")
    loaded = load_config(
        "runlocal",
        file,
        [Override.of("--epochs", "trainer.epochs", 4), "trainer.seed=8"],
        data="images",
    )
    config = loaded.config
    assert (config.name, config.trainer.epochs, config.trainer.seed) == ("birds", 4, 8)
    assert config.min_accuracy == 0.0  # the runlocal preset's, which no layer touches
    assert loaded.origins == {
        "name": f"config file {file}",
        "trainer.epochs": "--epochs",
        "trainer.seed": "--set trainer.seed=8",
        "trainer.stretch_epochs": "trainer.epochs from --epochs",
    }
    assert loaded.settings == {"name": "birds", "trainer": {"epochs": 3, "seed": 16}}


@pytest.mark.parametrize(
    ("file_text", "settings", "stretches"),
    [
        (None, [], True),
        ("trainer:\n  epochs: 3\n", [], False),
        (None, ["trainer.epochs=3"], False),
        (None, ["trainer.epochs=3", "trainer.stretch_epochs=true"], True),
        ("trainer:\n  stretch_epochs: true\n", ["trainer.epochs=3"], True),
    ],
    ids=["preset", "file", "set", "set_both", "file_stretches"],
)
def test_epochs_a_user_sets_are_obeyed_unless_stretching_is_asked_for(
    tmp_path, file_text, settings, stretches
):
    file = _file(tmp_path, file_text) if file_text else None
    loaded = load_config("local", file, settings, data="images")
    assert loaded.config.trainer.stretch_epochs is stretches
    if not stretches:
        assert loaded.origins["trainer.stretch_epochs"].startswith("trainer.epochs from ")


def test_without_a_file_the_preset_is_laid_out_under_the_build_folder():
    loaded = load_config("local", data="images", build_dir="/state")
    assert loaded.settings is None and loaded.origins == {}
    assert (loaded.config.ingest.input, loaded.config.pipeline_root) == ("images", "/state/tfx")


def test_a_build_folder_override_beats_the_file_paths(tmp_path):
    file = _file(tmp_path, "pipeline_root: /elsewhere/tfx\n")
    overrides = build_dir_overrides("local", "/state", "--build-dir")
    config = load_config("local", file, overrides, data="images").config
    assert (config.pipeline_root, config.serving_dir) == ("/state/tfx", "/state/serving")


def test_beam_arguments_come_after_the_file_so_the_command_line_wins(tmp_path):
    file = _file(tmp_path, "beam_args: ['--direct_num_workers=4']\n")
    config = load_config("local", file, data="x", beam_args=["--direct_num_workers=1"]).config
    assert config.beam_args == ("--direct_num_workers=4", "--direct_num_workers=1")


def test_a_null_override_clears_an_optional_setting():
    config = load_config("local", None, [Override.of("VAR", "schedule", None)], data="x").config
    assert config.schedule is None


@pytest.mark.parametrize(
    ("preset", "overrides", "field"),
    [
        ("huge", [], "preset"),
        ("local", ["trainer.epochs=0"], "trainer.epochs"),
        ("local", [Override.of("--eval-fraction", "ingest.eval_fraction", 1.5)], "ingest."),
        ("local", ["nonsense"], "nonsense"),
    ],
)
def test_a_bad_layer_is_a_config_error_naming_the_field(preset, overrides, field):
    with pytest.raises(ConfigError) as error:
        load_config(preset, None, overrides, data="x")
    assert error.value.field.startswith(field)


@pytest.mark.parametrize("model", ["efficientnet_lite0", "resnet50"])
def test_an_imagenet_backbone_fine_tunes_at_its_own_rate_unless_the_user_sets_one(model):
    settings = [f"trainer.model={model}", "trainer.weights=imagenet"]
    loaded = load_config("local", None, settings, data="images")
    assert loaded.config.trainer.fine_tune_learning_rate == IMAGENET_FINE_TUNE_LEARNING_RATE
    assert loaded.origins["trainer.fine_tune_learning_rate"] == (
        f"default for trainer.model={model} with trainer.weights=imagenet"
    )
    explicit = load_config(
        "local", None, [*settings, "trainer.fine_tune_learning_rate=0.001"], data="images"
    )
    assert explicit.config.trainer.fine_tune_learning_rate == 0.001
    assert explicit.origins["trainer.fine_tune_learning_rate"].startswith("--set ")


@pytest.mark.parametrize(
    "settings",
    [[], ["trainer.model=efficientnet_lite0"], ["trainer.model=resnet50"]],
    ids=["small_cnn", "lite0_scratch", "resnet50_scratch"],
)
def test_a_backbone_without_imagenet_weights_keeps_the_general_fine_tune_rate(settings):
    loaded = load_config("local", None, settings, data="images")
    assert loaded.config.trainer.fine_tune_learning_rate == TrainerConfig().fine_tune_learning_rate
    assert "trainer.fine_tune_learning_rate" not in loaded.origins


def test_lite0_from_imagenet_trains_at_its_own_image_size_unless_the_user_sets_one(tmp_path):
    settings = ["trainer.model=efficientnet_lite0", "trainer.weights=imagenet"]
    loaded = load_config("local", None, settings, data="images")
    assert loaded.config.trainer.image_size == LITE0_IMAGENET_IMAGE_SIZE
    assert loaded.origins["trainer.image_size"] == (
        "default for trainer.model=efficientnet_lite0 with trainer.weights=imagenet"
    )
    file = _file(tmp_path, "trainer:\n  image_size: 64\n")
    explicit = load_config("local", file, settings, data="images")
    assert explicit.config.trainer.image_size == 64
    assert explicit.origins["trainer.image_size"] == f"config file {file}"
    resnet = load_config(
        "local", None, ["trainer.model=resnet50", "trainer.weights=imagenet"], data="images"
    )
    assert resnet.config.trainer.image_size == TrainerConfig().image_size
    assert "trainer.image_size" not in resnet.origins


def test_a_presets_own_choice_is_kept_over_the_backbones_default():
    settings = [
        "trainer.model=efficientnet_lite0",
        "trainer.weights=imagenet",
        "trainer.epochs=2",
        "trainer.frozen_epochs=1",
    ]
    loaded = load_config("runlocal", None, settings, data="images")
    assert loaded.config.trainer.image_size == runlocal().image_size
    assert "trainer.image_size" not in loaded.origins
    assert loaded.config.trainer.fine_tune_learning_rate == IMAGENET_FINE_TUNE_LEARNING_RATE
