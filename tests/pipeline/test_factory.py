from pipeline.config import local_preset
from pipeline.data_snapshot import DataSnapshot
from pipeline.factory import create_pipeline
from pipeline.mlmd_connection import MlmdTarget
from tests.pipeline.expected import COMPONENTS


def test_factory_is_pure_and_wires_every_component(tmp_path):
    config = local_preset(str(tmp_path / "images"), str(tmp_path / "build"))
    store = MlmdTarget(mysql="127.0.0.1:3306/mlmd").connection_config(read_only=False)
    pipeline = create_pipeline(config, DataSnapshot("abc", 1), "def", store)
    assert sorted(c.id for c in pipeline.components) == sorted(COMPONENTS)
    assert pipeline.metadata_connection_config == store  # the runner's choice of store
    assert [p for p in tmp_path.rglob("*") if p.is_file()] == []  # nothing written
    assert pipeline.beam_pipeline_args == list(config.beam_args)
