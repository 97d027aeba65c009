"""The TFX side of the trainer: config round trip, the stable checkpoint folder, and the report
as Model artifact properties."""

from tfx.components.trainer.fn_args_utils import FnArgs
from tfx.types import standard_artifacts

from components import trainer_module
from components.trainer.config import TrainerConfig


def test_config_survives_json_with_a_profile_range():
    config = TrainerConfig(profile_steps=(3, 5), jit_compile=True)
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
