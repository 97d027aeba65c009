from pipeline.config import local_preset
from pipeline.data_snapshot import DataSnapshot
from pipeline.factory import create_pipeline
from tests.pipeline.expected import COMPONENTS


def test_factory_is_pure_and_wires_every_component(tmp_path):
    config = local_preset(str(tmp_path / "images"), str(tmp_path / "build"))
    pipeline = create_pipeline(config, DataSnapshot("abc", 1), code_fingerprint="def")
    assert sorted(c.id for c in pipeline.components) == sorted(COMPONENTS)
    # Nothing written: TFX's SQLite config helper only creates the store's (empty) folder.
    assert [p for p in tmp_path.rglob("*") if p.is_file()] == []
    assert pipeline.beam_pipeline_args == list(config.beam_args)
