"""The TFX side of the trainer: config round trip, the stable checkpoint folder, the class names
from the Examples, and the report as Model artifact properties."""

import json

import pytest
from tfx.components.trainer.fn_args_utils import FnArgs
from tfx.types import standard_artifacts

from components.metadata_keys import CLASS_NAMES_KEY, LABEL_MAP_PROPERTY
from components.training import trainer as trainer_module
from components.training.trainer_config import AugmentConfig, EarlyStoppingConfig, TrainerConfig


def test_config_survives_json_with_a_profile_range_and_augmentation():
    config = TrainerConfig(
        profile_steps=(3, 5),
        jit_compile=True,
        augment=AugmentConfig(flip=False, crop=1.0),
        early_stopping=EarlyStoppingConfig(patience=3, metric="loss", min_delta=0.01),
    )
    text = trainer_module.trainer_config_to_json(config)
    assert trainer_module.trainer_config_from_json(text) == config


def _fn_args(execution: int, **changes) -> FnArgs:
    values = {
        "model_run_dir": f"/root/imgpipe/Trainer/model_run/{execution}",
        "train_files": ["/root/imgpipe/ImageExampleGen/examples/1/Split-train/*"],
        "eval_files": ["/root/imgpipe/ImageExampleGen/examples/1/Split-eval/*"],
        "transform_output": "/root/imgpipe/Transform/transform_graph/5",
        "custom_config": {"trainer_config": "{}", "code_fingerprint": "abc"},
    }
    return FnArgs(**{**values, **changes})


def test_checkpoint_dir_is_shared_by_executions_with_the_same_inputs():
    first = trainer_module.checkpoint_dir(_fn_args(7))
    assert first == trainer_module.checkpoint_dir(_fn_args(8))  # a re-run after a kill
    assert first.startswith("/root/imgpipe/Trainer/checkpoints/")
    new_data = _fn_args(8, train_files=["/root/imgpipe/ImageExampleGen/examples/9/Split-train/*"])
    new_code = _fn_args(8, custom_config={"trainer_config": "{}", "code_fingerprint": "def"})
    new_transform = _fn_args(8, transform_output="/root/imgpipe/Transform/transform_graph/6")
    for changed in (new_data, new_code, new_transform):
        assert trainer_module.checkpoint_dir(changed) != first


def test_report_becomes_typed_custom_properties():
    model = standard_artifacts.Model()
    report = {"images_per_second": 12.5, "retraces": 0, "xla": False, "devices": ("a", "b")}
    trainer_module.record_report(model, report)
    properties = model.mlmd_artifact.custom_properties
    assert properties["perf_images_per_second"].double_value == 12.5
    assert properties["perf_retraces"].int_value == 0
    assert properties["perf_xla"].int_value == 0
    assert properties["perf_devices"].string_value == "a,b"


def _examples(label_map: dict | None) -> standard_artifacts.Examples:
    examples = standard_artifacts.Examples()
    examples.uri = "/root/imgpipe/ImageExampleGen/examples/1"
    if label_map is not None:
        examples.set_string_custom_property(LABEL_MAP_PROPERTY, json.dumps(label_map))
    return examples


def test_class_names_come_from_the_examples_label_map_in_id_order():
    """The head's outputs follow the ids ImageExampleGen gave, whatever the names' order."""
    properties = {"custom_config": json.dumps({"trainer_config": "{}"}), "run_fn": "m.f"}
    examples = _examples({"square": 0, "circle": 1, "arrow": 2})
    added = trainer_module.with_class_names({"examples": [examples]}, properties)
    custom_config = json.loads(added["custom_config"])
    assert custom_config[CLASS_NAMES_KEY] == ["square", "circle", "arrow"]
    assert custom_config["trainer_config"] == "{}" and added["run_fn"] == "m.f"
    assert CLASS_NAMES_KEY not in json.loads(properties["custom_config"])  # not changed in place


def test_examples_without_a_label_map_are_refused_by_name():
    with pytest.raises(ValueError, match="carry no label map .* train on ImageExampleGen's output"):
        trainer_module.with_class_names({"examples": [_examples(None)]}, {"custom_config": "null"})
