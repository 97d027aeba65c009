import json

from pipeline.config import local_preset
from pipeline.data_snapshot import DataSnapshot
from pipeline.factory import create_pipeline
from tests.pipeline.expected import COMPONENTS, SCHEMA_IMPORTER


def test_factory_is_pure_and_wires_every_component(tmp_path):
    config = local_preset(str(tmp_path / "images"), str(tmp_path / "build"))
    pipeline = create_pipeline(
        config, DataSnapshot("abc", 1, ("cat", "dog")), code_fingerprint="def"
    )
    assert sorted(c.id for c in pipeline.components) == sorted(COMPONENTS)
    # Nothing written: TFX's SQLite config helper only creates the store's (empty) folder.
    assert [p for p in tmp_path.rglob("*") if p.is_file()] == []
    assert pipeline.beam_pipeline_args == list(config.beam_args)


def test_a_later_span_imports_the_decided_schema_and_keeps_the_label_ids(tmp_path):
    config = local_preset(str(tmp_path / "images"), str(tmp_path / "build"))
    reference = {"dog": 0, "cat": 1}
    data = DataSnapshot(
        "abc", 2, ("cat", "dog"), 1, reference_label_map=reference, schema_uri="/s/Schema/3"
    )
    nodes = {c.id: c for c in create_pipeline(config, data, code_fingerprint="def").components}
    assert set(nodes) == set(COMPONENTS) - {"CuratedSchemaGen"} | {SCHEMA_IMPORTER}
    assert nodes[SCHEMA_IMPORTER].exec_properties["artifact_uri"] == "/s/Schema/3"
    for node in ("ImageExampleGen", "DataGate"):
        assert json.loads(nodes[node].exec_properties["reference_label_map"]) == reference
    assert "DataGate" in {n.id for n in nodes["Transform"].upstream_nodes}
