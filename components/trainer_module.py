"""The TFX Trainer's module_file: maps FnArgs onto the trainer core, which runs without TFX.

The normalization constants and class names come from the Transform graph, so the model is
trained and served with statistics computed over the whole train split by Beam.
"""

import dataclasses
import json

import tensorflow_transform as tft
from apache_beam.io.filesystems import FileSystems
from tfx.components.trainer.fn_args_utils import FnArgs

from components.trainer.config import TrainerConfig
from components.trainer.train import train
from components.transform_module import label_names, normalization_from_transform

TRAINER_CONFIG_KEY = "trainer_config"  # custom_config key: TrainerConfig as JSON
METRICS_FILE = "training_metrics.json"


def trainer_config_to_json(config: TrainerConfig) -> str:
    return json.dumps(dataclasses.asdict(config), sort_keys=True)


def run_fn(fn_args: FnArgs) -> None:
    config = TrainerConfig(**json.loads(fn_args.custom_config[TRAINER_CONFIG_KEY]))
    transform_output = tft.TFTransformOutput(fn_args.transform_output)
    metrics = train(
        config,
        fn_args.train_files,
        fn_args.eval_files,
        label_names(transform_output),
        normalization_from_transform(transform_output),
        output_dir=fn_args.model_run_dir,
        serving_model_dir=fn_args.serving_model_dir,
    )
    with FileSystems.create(FileSystems.join(fn_args.model_run_dir, METRICS_FILE)) as handle:
        handle.write(json.dumps(metrics, indent=2, sort_keys=True, default=str).encode())
