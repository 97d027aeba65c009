from pipeline.config import local_preset
from pipeline.factory import create_pipeline


def test_factory_is_pure_and_wires_every_component(tmp_path):
    config = local_preset(str(tmp_path / "images"), str(tmp_path / "build"))
    pipeline = create_pipeline(config, input_fingerprint="abc")
    assert [c.id for c in pipeline.components] == [
        "ImageExampleGen",
        "StatisticsGen",
        "SchemaGen",
        "ExampleValidator",
        "AnomaliesGate",
    ]
    # Nothing written: TFX's SQLite config helper only creates the store's (empty) folder.
    assert [p for p in tmp_path.rglob("*") if p.is_file()] == []
    assert pipeline.beam_pipeline_args == list(config.beam_args)
