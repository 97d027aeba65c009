import dataclasses

from components.trainer.config import TuningConfig
from pipeline.config import local_preset
from pipeline.data_snapshot import DataSnapshot
from pipeline.factory import WARM_START_NODE, create_pipeline
from tests.pipeline.expected import COMPONENTS


def test_factory_is_pure_and_wires_every_component(tmp_path):
    config = local_preset(str(tmp_path / "images"), str(tmp_path / "build"))
    pipeline = create_pipeline(
        config, DataSnapshot("abc", 1, ("cat", "dog")), code_fingerprint="def"
    )
    assert sorted(c.id for c in pipeline.components) == sorted(COMPONENTS)
    # Nothing written: TFX's SQLite config helper only creates the store's (empty) folder.
    assert [p for p in tmp_path.rglob("*") if p.is_file()] == []
    assert pipeline.beam_pipeline_args == list(config.beam_args)


def test_warm_start_and_tuning_add_their_nodes_and_feed_the_trainer(tmp_path):
    config = local_preset(str(tmp_path / "images"), str(tmp_path / "build"))
    config = dataclasses.replace(
        config,
        trainer=dataclasses.replace(config.trainer, warm_start=True),
        tuning=TuningConfig(enabled=True),
    )
    pipeline = create_pipeline(
        config, DataSnapshot("abc", 1, ("cat", "dog")), code_fingerprint="def"
    )
    by_id = {component.id: component for component in pipeline.components}
    assert sorted(by_id) == sorted([*COMPONENTS, "Tuner", WARM_START_NODE])
    trainer_inputs = by_id["Trainer"].inputs
    assert trainer_inputs["base_model"].producer_component_id == WARM_START_NODE
    assert trainer_inputs["hyperparameters"].producer_component_id == "Tuner"
