"""TrainerConfig must reject bad values before any work starts, naming the field."""

import dataclasses

import pytest

from components.trainer.config import TrainerConfig, runlocal
from data_prep.config import ConfigError


def test_defaults_and_runlocal_are_valid():
    assert TrainerConfig().validate() == TrainerConfig()
    small = runlocal().validate()
    assert small.image_size < TrainerConfig().image_size
    assert small.epochs == 1


@pytest.mark.parametrize(
    ("changes", "field"),
    [
        ({"image_size": 31}, "image_size"),
        ({"model": "vgg99"}, "model"),
        ({"weights_path": "/no/such/weights.h5"}, "weights_path"),
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
    ],
)
def test_bad_values_name_the_field(changes, field):
    config = dataclasses.replace(TrainerConfig(), **changes)
    with pytest.raises(ConfigError, match=f"^{field}: ") as error:
        config.validate()
    assert error.value.field == field


def test_weights_path_may_be_a_checkpoint_prefix(tmp_path):
    (tmp_path / "ckpt.index").write_bytes(b"")
    config = TrainerConfig(weights_path=str(tmp_path / "ckpt"))
    assert config.validate() is config


def test_shuffle_buffer_of_exactly_ten_batches_is_enough():
    TrainerConfig(batch_size=8, shuffle_buffer=80).validate()
