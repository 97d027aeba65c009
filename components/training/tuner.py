"""The TFX Tuner's module_file and executor: a KerasTuner search (random search or Hyperband)
whose trials are train() calls, on the same input pipeline and engine as the Trainer, scored by
eval-split accuracy. The best trial's values reach the Trainer through TFX's hyperparameters
channel (with_hyperparameters applies them), and are recorded in ML Metadata as custom
properties of the HyperParameters artifact.
"""

from __future__ import annotations

import dataclasses
import json
import os

import keras_tuner
import tensorflow_transform as tft
from tfx.components.trainer.fn_args_utils import FnArgs
from tfx.components.tuner import component as tuner_component
from tfx.components.tuner import executor as tuner_executor
from tfx.components.tuner.component import TunerFnResult
from tfx.dsl.components.base import executor_spec

from components.metadata_keys import CLASS_NAMES_KEY
from components.training.train import train
from components.training.trainer import (
    TRAINER_CONFIG_KEY,
    trainer_config_from_json,
    with_class_names,
)
from components.training.trainer_config import TrainerConfig, TuningConfig, with_hyperparameters
from components.training.transform import normalization_from_transform

TUNING_CONFIG_KEY = "tuning_config"  # custom_config key: TuningConfig as JSON
OBJECTIVE = "eval_accuracy"
BEST_PROPERTY_PREFIX = "best_"  # HyperParameters artifact custom properties: the best values
HYPERBAND_FACTOR = 3


def tuning_config_to_json(config: TuningConfig) -> str:
    return json.dumps(dataclasses.asdict(config), sort_keys=True)


def tuning_config_from_json(text: str) -> TuningConfig:
    values = json.loads(text)
    for name in ("learning_rate", "dropout", "frozen_epochs", "model"):
        values[name] = tuple(values[name])
    return TuningConfig(**values)


def hyperparameters(space: dict[str, tuple]) -> keras_tuner.HyperParameters:
    """One KerasTuner Choice per searched field."""
    hp = keras_tuner.HyperParameters()
    for name, values in space.items():
        hp.Choice(name, list(values))
    return hp


def trial_config(config: TrainerConfig, values: dict, epochs: int) -> TrainerConfig:
    """The Trainer config of one trial: the trial's values and its epoch budget, with the
    frozen phase and warmup shortened to fit inside it."""
    config = dataclasses.replace(with_hyperparameters(config, values), epochs=epochs)
    frozen = min(config.frozen_epochs, epochs - 1)
    warmup_limit = frozen - 1 if config.fine_tunes and frozen else epochs - 1
    return dataclasses.replace(
        config,
        frozen_epochs=frozen,
        warmup_epochs=max(min(config.warmup_epochs, warmup_limit), 0),
        report_input_pipeline=False,
    ).validate()


class _TrainerTrials:
    """run_trial for any KerasTuner tuner: a train() call, returning the objective."""

    def __init__(self, train_trial, **kwargs):
        super().__init__(hypermodel=None, **kwargs)
        self._train_trial = train_trial

    def run_trial(self, trial, *args, **kwargs):
        del args, kwargs  # the data comes from train_trial, not from search()
        values = trial.hyperparameters.values
        return {OBJECTIVE: self._train_trial(trial.trial_id, values, values.get("tuner/epochs"))}


class RandomSearchTrials(_TrainerTrials, keras_tuner.RandomSearch):
    pass


class HyperbandTrials(_TrainerTrials, keras_tuner.Hyperband):
    pass


def make_tuner(
    tuning: TuningConfig, trainer: TrainerConfig, train_trial, directory: str
) -> keras_tuner.Tuner:
    """train_trial(trial_id, values, epochs or None) -> eval accuracy."""
    common = {
        "train_trial": train_trial,
        "hyperparameters": hyperparameters(tuning.search_space(trainer)),
        "objective": keras_tuner.Objective(OBJECTIVE, direction="max"),
        "seed": tuning.seed,
        "directory": directory,
        "project_name": "imgpipe",
        "overwrite": True,
    }
    if tuning.algorithm == "random_search":
        return RandomSearchTrials(max_trials=tuning.max_trials, **common)
    tuner = HyperbandTrials(max_epochs=trainer.epochs, factor=HYPERBAND_FACTOR, **common)
    # Hyperband's own bracket sizes decide its trials; the oracle's generic budget caps them.
    tuner.oracle.max_trials = tuning.max_trials
    return tuner


def tuner_fn(fn_args: FnArgs) -> TunerFnResult:
    trainer = trainer_config_from_json(fn_args.custom_config[TRAINER_CONFIG_KEY])
    tuning = tuning_config_from_json(fn_args.custom_config[TUNING_CONFIG_KEY])
    transform_output = tft.TFTransformOutput(fn_args.transform_graph_path)
    names = fn_args.custom_config[CLASS_NAMES_KEY]
    normalization = normalization_from_transform(transform_output)

    def train_trial(trial_id: str, values: dict, epochs: int | None) -> float:
        config = trial_config(trainer, values, epochs or tuning.trial_epochs or trainer.epochs)
        metrics = train(
            config,
            fn_args.train_files,
            fn_args.eval_files,
            names,
            normalization,
            output_dir=os.path.join(fn_args.working_dir, "trials", trial_id),
        )
        return float(metrics["eval_accuracy"])

    tuner = make_tuner(tuning, trainer, train_trial, fn_args.working_dir)
    return TunerFnResult(tuner=tuner, fit_kwargs={"verbose": 0})


class TunerExecutor(tuner_executor.Executor):
    """TFX's Tuner executor without its printed summaries (the console prints one line per
    component), recording the best values on the HyperParameters artifact."""

    def Do(self, input_dict, output_dict, exec_properties) -> None:  # noqa: N802 (TFX's name)
        tuner = tuner_executor.search(
            input_dict,
            with_class_names(input_dict, exec_properties),
            self._get_tmp_dir(),
            print_tuning_summary=False,
        )
        tuner_executor.write_best_hyperparameters(tuner, output_dict)
        (best_trial,) = tuner.oracle.get_best_trials(1)
        artifact = output_dict["best_hyperparameters"][0]
        record_best(artifact, best_trial.hyperparameters.values, best_trial.score)


def record_best(artifact, values: dict, score: float | None) -> None:
    for name, value in sorted(values.items()):
        key = BEST_PROPERTY_PREFIX + name.replace("/", "_")
        if isinstance(value, bool | int):
            artifact.set_int_custom_property(key, int(value))
        elif isinstance(value, float):
            artifact.set_float_custom_property(key, value)
        else:
            artifact.set_string_custom_property(key, str(value))
    if score is not None:
        artifact.set_float_custom_property(BEST_PROPERTY_PREFIX + OBJECTIVE, float(score))


class Tuner(tuner_component.Tuner):
    """TFX's Tuner component with TunerExecutor."""

    EXECUTOR_SPEC = executor_spec.ExecutorClassSpec(TunerExecutor)
