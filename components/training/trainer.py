"""The TFX Trainer's module_file and executor: map FnArgs onto the trainer core (which runs
without TFX) and record the run's performance report in ML Metadata.

The normalization constants come from the Transform graph, so the model is trained and served
with statistics computed over the whole train split by Beam; the class names from the label map
ImageExampleGen recorded on the Examples, the one source of the class set. A base_model
input (the pipeline's warm-start resolver) is the model this run starts from; its id is recorded
on the new Model artifact.
"""

import dataclasses
import json
import posixpath

import tensorflow_transform as tft
from apache_beam.io.filesystems import FileSystems
from tfx.components.trainer.executor import GenericExecutor
from tfx.components.trainer.fn_args_utils import FnArgs
from tfx.components.util import udf_utils
from tfx.types import standard_component_specs

from components.metadata_keys import (
    CLASS_NAMES_KEY,
    LABEL_MAP_PROPERTY,
    PERFORMANCE_PROPERTY_PREFIX,
    TRAINER_CONFIG_KEY,
    TRAINING_OUTCOME,
    TRAINING_PROPERTY_PREFIX,
    WARM_STARTED_FROM_PROPERTY,
)
from components.training import local_workers, runtime
from components.training.checkpoints import stable_checkpoint_dir
from components.training.report import read_report, write_report
from components.training.train import train
from components.training.trainer_config import (
    AugmentConfig,
    EarlyStoppingConfig,
    TrainerConfig,
    with_hyperparameters,
)
from components.training.transform import normalization_from_transform
from data_prep.contract.label_map import class_names

METRICS_FILE = "training_metrics.json"
TUNED_FILE = "tuned_hyperparameters.json"  # the Tuner's values this run trained with
BASE_MODEL_KEY = "base_model"  # the Trainer's input, as TFX names it
# What run_fn reads of its FnArgs: what its local worker processes are given.
WORKER_FN_ARGS = (
    "train_files",
    "eval_files",
    "transform_output",
    "model_run_dir",
    "serving_model_dir",
    "custom_config",
    "hyperparameters",
    "base_model",
)


def trainer_config_to_json(config: TrainerConfig) -> str:
    return json.dumps(dataclasses.asdict(config), sort_keys=True)


def trainer_config_from_json(text: str) -> TrainerConfig:
    values = json.loads(text)
    if values.get("profile_steps") is not None:
        values["profile_steps"] = tuple(values["profile_steps"])
    if "augment" in values:
        values["augment"] = AugmentConfig(**values["augment"])
    if "early_stopping" in values:
        values["early_stopping"] = EarlyStoppingConfig(**values["early_stopping"])
    return TrainerConfig(**values)


def checkpoint_dir(fn_args: FnArgs) -> str:
    """A folder that every execution of this Trainer with the same inputs finds again, so a re-run
    after a kill resumes: <pipeline root>/<Trainer node>/checkpoints/<fingerprint>. The
    fingerprint covers what shapes the training: the Examples and Transform artifacts (new URIs
    when data or preprocessing change), the splits' files, the Trainer config, the code
    fingerprint and the base model. model_run_dir is
    <pipeline root>/<node>/model_run/<execution id>."""
    node_dir = posixpath.dirname(posixpath.dirname(fn_args.model_run_dir.rstrip("/")))
    inputs = {
        "train_files": fn_args.train_files,
        "eval_files": fn_args.eval_files,
        "transform_output": fn_args.transform_output,
        "custom_config": fn_args.custom_config,
        "base_model": fn_args.base_model,
    }
    return stable_checkpoint_dir(posixpath.join(node_dir, "checkpoints"), inputs)


def run_fn(fn_args: FnArgs) -> None:
    config = trainer_config_from_json(fn_args.custom_config[TRAINER_CONFIG_KEY])
    tuned = (fn_args.hyperparameters or {}).get("values", {})
    config = with_hyperparameters(config, tuned)
    if config.workers > 1 and runtime.cluster_workers() == 1:
        # The chief among them writes the metrics, the report and the model, as below.
        arguments = {name: getattr(fn_args, name) for name in WORKER_FN_ARGS}
        local_workers.run_workers(
            config.workers, f"{__name__}:run_as_worker", json.dumps(arguments)
        )
        return
    # First: MultiWorkerMirroredStrategy must exist before TensorFlow starts in this process.
    strategy = runtime.make_strategy(config)
    transform_output = tft.TFTransformOutput(fn_args.transform_output)
    metrics = train(
        config,
        fn_args.train_files,
        fn_args.eval_files,
        fn_args.custom_config[CLASS_NAMES_KEY],
        normalization_from_transform(transform_output),
        output_dir=fn_args.model_run_dir,
        serving_model_dir=fn_args.serving_model_dir,
        checkpoint_dir=checkpoint_dir(fn_args),
        strategy=strategy,
        base_model_dir=fn_args.base_model,
    )
    if not metrics["chief"]:
        return
    with FileSystems.create(FileSystems.join(fn_args.model_run_dir, METRICS_FILE)) as handle:
        handle.write(json.dumps(metrics, indent=2, sort_keys=True, default=str).encode())
    if tuned:  # beside the metrics: the model card shows every JSON file of the model run
        with FileSystems.create(FileSystems.join(fn_args.model_run_dir, TUNED_FILE)) as handle:
            handle.write(json.dumps(tuned, indent=2, sort_keys=True).encode())
    # Beside the SavedModel (serving_model_dir is <Model artifact>/Format-Serving).
    write_report(metrics["performance"], posixpath.dirname(fn_args.serving_model_dir))


def run_as_worker(arguments: str) -> None:
    """One of run_fn's local worker processes: run_fn with the Trainer's arguments (JSON of
    WORKER_FN_ARGS) under the TF_CONFIG its parent gave it."""
    run_fn(FnArgs(**json.loads(arguments)))


class TrainerExecutor(GenericExecutor):
    """GenericExecutor, plus: the performance report and how the training went (its epochs,
    which one was exported and why it stopped) become custom properties of the output Model
    artifact (the launcher publishes them to MLMD), and on a multi-worker cluster only the
    chief's execution checks for and records the exported model."""

    def Do(self, input_dict, output_dict, exec_properties) -> None:  # noqa: N802 (TFX's name)
        exec_properties = with_class_names(input_dict, exec_properties)
        if not runtime.is_chief_task():
            udf_utils.get_fn(exec_properties, "run_fn")(
                self._GetFnArgs(input_dict, output_dict, exec_properties)
            )
            return
        super().Do(input_dict, output_dict, exec_properties)
        model = output_dict["model"][0]
        report = read_report(model.uri)
        if report is None:
            raise RuntimeError(f"run_fn wrote no performance report under {model.uri}")
        record_report(model, report)
        [model_run] = output_dict[standard_component_specs.MODEL_RUN_KEY]
        with FileSystems.open(FileSystems.join(model_run.uri, METRICS_FILE)) as handle:
            metrics = json.loads(handle.read())
        outcome = {key: metrics[key] for key in TRAINING_OUTCOME if metrics.get(key) is not None}
        record_report(model, outcome, TRAINING_PROPERTY_PREFIX)
        for base_model in input_dict.get(BASE_MODEL_KEY, []):
            model.set_int_custom_property(WARM_STARTED_FROM_PROPERTY, base_model.id)


def with_class_names(input_dict, exec_properties) -> dict:
    """exec_properties whose custom_config also holds CLASS_NAMES_KEY: the class names in id
    order, from the label map ImageExampleGen recorded on the Examples."""
    [examples] = input_dict[standard_component_specs.EXAMPLES_KEY]
    label_map = examples.get_string_custom_property(LABEL_MAP_PROPERTY)
    if not label_map:
        raise ValueError(
            f"the Examples at {examples.uri} carry no label map (custom property "
            f"'{LABEL_MAP_PROPERTY}'): train on ImageExampleGen's output"
        )
    # TFX serializes an absent custom_config as "null".
    custom_config = (
        json.loads(exec_properties.get(standard_component_specs.CUSTOM_CONFIG_KEY) or "null") or {}
    )
    custom_config[CLASS_NAMES_KEY] = class_names(json.loads(label_map))
    return {
        **exec_properties,
        standard_component_specs.CUSTOM_CONFIG_KEY: json.dumps(custom_config, sort_keys=True),
    }


def record_report(artifact, report: dict, prefix: str = PERFORMANCE_PROPERTY_PREFIX) -> None:
    """Numbers as float/int custom properties, everything else as strings, each name prefixed."""
    for key, value in sorted(report.items()):
        name = prefix + key
        if isinstance(value, bool):
            artifact.set_int_custom_property(name, int(value))
        elif isinstance(value, int):
            artifact.set_int_custom_property(name, value)
        elif isinstance(value, float):
            artifact.set_float_custom_property(name, value)
        elif isinstance(value, list | tuple):
            artifact.set_string_custom_property(name, ",".join(map(str, value)))
        else:
            artifact.set_string_custom_property(name, str(value))
