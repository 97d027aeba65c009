"""The Tuner's search: trials are scored by the train function it is given, the best trial's
values are what the Trainer gets, Hyperband hands each trial its epoch budget, and a trial's
config fits its frozen phase and warmup inside that budget."""

import dataclasses

import pytest

from components.training import tuner as tuner_module
from components.training.trainer_config import TrainerConfig, TuningConfig, with_hyperparameters


def _search(tuning: TuningConfig, trainer: TrainerConfig, tmp_path):
    trials = []

    def train_trial(trial_id, values, epochs):
        trials.append((dict(values), epochs))
        return values["learning_rate"] * 100 - values.get("dropout", 0)  # best: 0.01, 0.1

    tuner = tuner_module.make_tuner(tuning, trainer, train_trial, str(tmp_path))
    tuner.search(verbose=0)
    return tuner, trials


def test_random_search_runs_its_budget_and_the_best_values_reach_the_trainer(tmp_path):
    tuning = TuningConfig(max_trials=4, learning_rate=(0.001, 0.01), dropout=(0.1, 0.4))
    tuner, trials = _search(tuning, TrainerConfig(), tmp_path)

    assert len(trials) == 4 and all(epochs is None for _, epochs in trials)
    best = tuner.get_best_hyperparameters()[0].get_config()  # what TFX writes for the Trainer
    trainer = with_hyperparameters(TrainerConfig(), best["values"])
    assert (trainer.learning_rate, trainer.dropout) == (0.01, 0.1)


def test_hyperband_gives_each_trial_an_epoch_budget(tmp_path):
    tuning = TuningConfig(algorithm="hyperband", max_trials=3, learning_rate=(0.001, 0.01))
    _, trials = _search(tuning, TrainerConfig(epochs=9), tmp_path)
    assert len(trials) == 3
    assert all(1 <= epochs <= 9 for _, epochs in trials)


@pytest.mark.parametrize(("epochs", "frozen", "warmup"), [(1, 0, 0), (2, 1, 0), (9, 3, 2)])
def test_a_trial_config_fits_its_epoch_budget(tmp_path, epochs, frozen, warmup):
    weights = tmp_path / "backbone.h5"
    weights.write_bytes(b"")
    trainer = TrainerConfig(weights_path=str(weights), frozen_epochs=5, warmup_epochs=4)
    config = tuner_module.trial_config(trainer, {"frozen_epochs": 3}, epochs)
    assert (config.epochs, config.frozen_epochs, config.warmup_epochs) == (epochs, frozen, warmup)


def test_tuning_config_survives_json():
    config = dataclasses.replace(TuningConfig(), enabled=True, model=("small_cnn",))
    text = tuner_module.tuning_config_to_json(config)
    assert tuner_module.tuning_config_from_json(text) == config
