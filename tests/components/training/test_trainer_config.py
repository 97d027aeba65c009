"""TrainerConfig must reject bad values before any work starts, naming the field."""

import dataclasses

import pytest

from components.training import trainer_config
from components.training.trainer_config import (
    KERAS_NOTOP_FILES,
    TrainerConfig,
    TuningConfig,
    imagenet_download_problem,
    runlocal,
    with_hyperparameters,
)
from data_prep.contract.config_error import ConfigError


def test_defaults_and_runlocal_are_valid():
    assert TrainerConfig().validate() == TrainerConfig()
    small = runlocal().validate()
    assert small.image_size < TrainerConfig().image_size
    assert small.epochs == 1


@pytest.mark.parametrize(
    ("changes", "field"),
    [
        ({"image_size": 7}, "image_size"),
        ({"image_size": 31, "model": "resnet50"}, "image_size"),
        ({"model": "vgg99"}, "model"),
        ({"weights_path": "/no/such/weights.h5"}, "weights_path"),
        ({"model": "efficientnet_lite0", "weights": "imagenet21k"}, "weights"),
        ({"weights": "imagenet"}, "weights"),  # small_cnn has none
        (
            {"model": "efficientnet_lite0", "weights": "imagenet", "weights_path": "/tmp"},
            "weights",
        ),
        ({"batch_size": 0}, "batch_size"),
        ({"epochs": 0}, "epochs"),
        ({"epochs": 3, "warmup_epochs": 3}, "warmup_epochs"),
        ({"warmup_epochs": -1}, "warmup_epochs"),
        ({"steps_per_execution": 0}, "steps_per_execution"),
        ({"learning_rate": 0.0}, "learning_rate"),
        ({"learning_rate": 2.0}, "learning_rate"),
        ({"batch_size": 64, "shuffle_buffer": 639}, "shuffle_buffer"),
        ({"cache_budget_bytes": -1}, "cache_budget_bytes"),
        ({"seed": -1}, "seed"),
        ({"precision": "float8"}, "precision"),
        ({"jit_compile": "yes"}, "jit_compile"),
        ({"gradient_accumulation_steps": 0}, "gradient_accumulation_steps"),
        ({"checkpoint_every_steps": -1}, "checkpoint_every_steps"),
        ({"profile_steps": (5, 2)}, "profile_steps"),
        ({"profile_steps": (0, 2)}, "profile_steps"),
        ({"intra_op_threads": -1}, "intra_op_threads"),
        ({"report_input_pipeline": "yes"}, "report_input_pipeline"),
        ({"fine_tune_learning_rate": 0.0}, "fine_tune_learning_rate"),
        ({"unfreeze_layers": -1}, "unfreeze_layers"),
        ({"backbone_preprocessing": "yes"}, "backbone_preprocessing"),
        ({"warm_start": 1}, "warm_start"),
        ({"warm_start_epochs": 0}, "warm_start_epochs"),
        ({"min_phase_steps": -1}, "min_phase_steps"),
        ({"dropout": 1.0}, "dropout"),
        ({"label_smoothing": 1.0}, "label_smoothing"),
        ({"label_smoothing": -0.1}, "label_smoothing"),
        ({"mixup_alpha": -0.2}, "mixup_alpha"),
        ({"cutmix_alpha": -1.0}, "cutmix_alpha"),
        ({"mixup_alpha": 0.2, "cutmix_alpha": 1.0}, "cutmix_alpha"),
    ],
)
def test_bad_values_name_the_field(changes, field):
    config = dataclasses.replace(TrainerConfig(), **changes)
    with pytest.raises(ConfigError, match=f"^{field}: ") as error:
        config.validate()
    assert error.value.field == field


def test_soft_labels_are_off_by_default_and_on_with_any_switch():
    assert not TrainerConfig().soft_labels and not runlocal().soft_labels
    for switch in ({"label_smoothing": 0.1}, {"mixup_alpha": 0.2}, {"cutmix_alpha": 1.0}):
        assert TrainerConfig(**switch).validate().soft_labels


def test_weights_path_may_be_a_checkpoint_prefix(tmp_path):
    (tmp_path / "ckpt.index").write_bytes(b"")
    config = TrainerConfig(weights_path=str(tmp_path / "ckpt"))
    assert config.validate() is config


def test_shuffle_buffer_of_exactly_ten_batches_is_enough():
    TrainerConfig(batch_size=8, shuffle_buffer=80).validate()


@pytest.mark.parametrize(
    ("changes", "field"),
    [
        ({"epochs": 3, "frozen_epochs": 3}, "frozen_epochs"),
        ({"frozen_epochs": -1}, "frozen_epochs"),
        ({"frozen_epochs": 2, "warmup_epochs": 2}, "warmup_epochs"),
    ],
)
def test_bad_fine_tuning_schedules_name_the_field(tmp_path, changes, field):
    weights = tmp_path / "backbone.h5"
    weights.write_bytes(b"")
    config = dataclasses.replace(TrainerConfig(weights_path=str(weights)), **changes)
    with pytest.raises(ConfigError, match=f"^{field}: "):
        config.validate()


def test_efficientnets_take_pixels_whether_pretrained_or_not():
    """Their builder rescales 0..255 pixels inside the network."""
    for name in ("efficientnet_lite0", "efficientnet_b0"):
        assert TrainerConfig(model=name).uses_backbone_preprocessing
        with pytest.raises(ConfigError, match="^backbone_preprocessing: false does not suit"):
            TrainerConfig(model=name, backbone_preprocessing=False).validate()


def test_backbone_preprocessing_follows_the_weights_unless_set(tmp_path):
    weights = tmp_path / "backbone.h5"
    weights.write_bytes(b"")
    assert not TrainerConfig().uses_backbone_preprocessing
    assert TrainerConfig(weights_path=str(weights)).uses_backbone_preprocessing
    assert TrainerConfig(backbone_preprocessing=True).uses_backbone_preprocessing
    assert not TrainerConfig(
        weights_path=str(weights), backbone_preprocessing=False
    ).uses_backbone_preprocessing


@pytest.mark.parametrize(
    ("changes", "field"),
    [
        ({"algorithm": "grid"}, "algorithm"),
        ({"max_trials": 0}, "max_trials"),
        ({"trial_epochs": 0}, "trial_epochs"),
        ({"learning_rate": ()}, "learning_rate"),
        ({"model": ("vgg99",)}, "model"),
        ({"enabled": "yes"}, "enabled"),
    ],
)
def test_bad_tuning_values_name_the_field(changes, field):
    with pytest.raises(ConfigError, match=f"^{field}: "):
        dataclasses.replace(TuningConfig(), **changes).validate()


def test_search_space_holds_only_what_varies():
    space = TuningConfig(dropout=(0.2,), model=("small_cnn", "mobilenet_v3_small")).search_space(
        TrainerConfig()
    )
    # frozen_epochs is searched only when fine-tuning; a single dropout is not searched.
    assert set(space) == {"learning_rate", "model"}


def test_hyperparameters_override_only_tunable_fields():
    tuned = with_hyperparameters(
        TrainerConfig(), {"learning_rate": 0.01, "dropout": 0.4, "tuner/epochs": 3}
    )
    assert (tuned.learning_rate, tuned.dropout) == (0.01, 0.4)
    assert tuned.epochs == TrainerConfig().epochs


def test_small_cnn_takes_digit_sized_images_and_says_why_it_takes_no_smaller():
    assert dataclasses.replace(TrainerConfig(), image_size=28).validate().image_size == 28
    with pytest.raises(ConfigError, match="below 8 pixels, the smallest small_cnn takes"):
        dataclasses.replace(TrainerConfig(), image_size=4).validate()
    with pytest.raises(ConfigError, match="tf_keras.applications refuse inputs below 32"):
        dataclasses.replace(TrainerConfig(), image_size=28, model="mobilenet_v3_small").validate()


def test_imagenet_weights_fine_tune_like_a_weights_file():
    config = TrainerConfig(model="efficientnet_lite0", weights="imagenet").validate()

    assert config.fine_tunes and config.uses_backbone_preprocessing
    with pytest.raises(ConfigError, match="^frozen_epochs"):
        dataclasses.replace(config, frozen_epochs=config.epochs).validate()


def _unreachable(*_args, **_kwargs):
    raise OSError("Network is unreachable")


def test_unreachable_keras_weights_fail_up_front_naming_the_offline_backbone(tmp_path, monkeypatch):
    monkeypatch.setenv("KERAS_HOME", str(tmp_path))
    monkeypatch.setattr(trainer_config.socket, "create_connection", _unreachable)
    config = TrainerConfig(model="resnet50", weights="imagenet")

    problem = imagenet_download_problem(config)

    assert "\n" not in problem
    assert "resnet50" in problem and "model=efficientnet_lite0" in problem
    offline = dataclasses.replace(config, model="efficientnet_lite0")
    assert imagenet_download_problem(offline) is None
    assert imagenet_download_problem(dataclasses.replace(config, weights=None)) is None


def test_keras_weights_already_in_its_cache_need_no_network(tmp_path, monkeypatch):
    monkeypatch.setenv("KERAS_HOME", str(tmp_path))
    monkeypatch.setattr(trainer_config.socket, "create_connection", _unreachable)
    (tmp_path / "models").mkdir()
    (tmp_path / "models" / KERAS_NOTOP_FILES["efficientnet_b0"]).write_bytes(b"weights")

    config = TrainerConfig(model="efficientnet_b0", weights="imagenet")
    assert imagenet_download_problem(config) is None
