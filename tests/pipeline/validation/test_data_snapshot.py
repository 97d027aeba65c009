import json

import pytest
from ml_metadata.proto import metadata_store_pb2

from data_prep.writing.ingest_outputs import IngestOutputs
from pipeline.runners.local import open_store
from pipeline.validation.data_snapshot import (
    FIRST_SPAN,
    PREVIOUS_SOURCE_INDEX,
    REFERENCE_LABEL_MAP,
    newest_span,
    take_snapshot,
)
from tests.data_prep import image_files


def _record_examples(store, pipeline_name, span, fingerprint, state=None):
    """Puts an Examples artifact into the pipeline's context, as every TFX runner does; returns
    its id."""
    context_type = store.put_context_type(metadata_store_pb2.ContextType(name="pipeline"))
    pipeline = store.get_context_by_type_and_name("pipeline", pipeline_name)
    if pipeline is None:
        [pipeline_id] = store.put_contexts(
            [metadata_store_pb2.Context(type_id=context_type, name=pipeline_name)]
        )
    else:
        pipeline_id = pipeline.id
    examples_type = metadata_store_pb2.ArtifactType(name="Examples")
    examples_type.properties["span"] = metadata_store_pb2.INT
    artifact = metadata_store_pb2.Artifact(
        type_id=store.put_artifact_type(examples_type),
        state=state or metadata_store_pb2.Artifact.LIVE,
    )
    artifact.properties["span"].int_value = span
    artifact.custom_properties["input_fingerprint"].string_value = fingerprint
    [artifact_id] = store.put_artifacts([artifact])
    store.put_attributions_and_associations(
        [metadata_store_pb2.Attribution(artifact_id=artifact_id, context_id=pipeline_id)], []
    )
    return artifact_id


def _images(root, labels=("cat", "dog")):
    for index, label in enumerate(labels):
        path = root / label / "0.jpg"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(image_files.jpeg(seed=index))
    return str(root)


def test_first_ingest_is_the_first_span(tmp_path):
    snapshot = take_snapshot(_images(tmp_path / "in"), open_store(str(tmp_path / "m.db")), "p")
    assert (snapshot.span, snapshot.files) == (FIRST_SPAN, 2)


def test_unchanged_input_keeps_its_span_and_changed_input_is_the_next(tmp_path):
    store = open_store(str(tmp_path / "m.db"))
    images = _images(tmp_path / "in")
    first = take_snapshot(images, store, "p")
    _record_examples(store, "p", first.span, first.fingerprint)
    again = take_snapshot(images, store, "p")
    assert again.span == first.span

    (tmp_path / "in" / "dog" / "1.jpg").write_bytes(image_files.jpeg(seed=7))
    changed = take_snapshot(images, store, "p")
    assert changed.span == 2
    assert (again.files, changed.files) == (2, 3)
    assert changed.fingerprint != first.fingerprint


@pytest.mark.parametrize("recorded_as", ["custom_properties", "properties"])
def test_an_unchanged_span_keeps_the_reference_its_ingest_was_given(tmp_path, recorded_as):
    """Whichever launcher ran the ingest: IR-based ones record its settings as custom
    properties, TFX's legacy one (Airflow's) as properties."""
    store = open_store(str(tmp_path / "m.db"))
    images = _images(tmp_path / "in")
    first = take_snapshot(images, store, "p")
    examples_id = _record_examples(store, "p", first.span, first.fingerprint)
    given = {"cat": 0, "dog": 1, "owl": 2}
    kind = metadata_store_pb2.ExecutionType(name="ImageExampleGen")
    kind.properties[REFERENCE_LABEL_MAP] = metadata_store_pb2.STRING
    kind.properties[PREVIOUS_SOURCE_INDEX] = metadata_store_pb2.STRING
    execution = metadata_store_pb2.Execution(type_id=store.put_execution_type(kind))
    getattr(execution, recorded_as)[REFERENCE_LABEL_MAP].string_value = json.dumps(given)
    getattr(execution, recorded_as)[PREVIOUS_SOURCE_INDEX].string_value = "/old/index.jsonl.gz"
    report = metadata_store_pb2.Artifact(
        type_id=store.put_artifact_type(metadata_store_pb2.ArtifactType(name="IngestReport")),
        uri=str(tmp_path / "report"),
    )
    [examples] = store.get_artifacts_by_id([examples_id])
    store.put_execution(
        execution, [(examples, _output("examples")), (report, _output("ingest_report"))], []
    )
    unchanged = take_snapshot(images, store, "p")
    assert unchanged.reference_label_map == given
    assert unchanged.previous_source_index == "/old/index.jsonl.gz"
    # A new span keeps the splits of the newest one: its ingest's source index.
    (tmp_path / "in" / "dog" / "1.jpg").write_bytes(image_files.jpeg(seed=7))
    expected = IngestOutputs.under(str(tmp_path / "report")).source_index_path
    assert take_snapshot(images, store, "p").previous_source_index == expected


def _output(key):
    event = metadata_store_pb2.Event(type=metadata_store_pb2.Event.OUTPUT)
    event.path.steps.add().key = key
    event.path.steps.add().index = 0
    return event


def test_newest_span_ignores_other_pipelines_and_deleted_artifacts(tmp_path):
    store = open_store(str(tmp_path / "m.db"))
    assert newest_span(store, "p") is None
    _record_examples(store, "p", 1, "one")
    _record_examples(store, "p", 2, "two")
    _record_examples(store, "p", 3, "three", state=metadata_store_pb2.Artifact.DELETED)
    _record_examples(store, "other", 9, "nine")
    assert newest_span(store, "p") == (2, "two")
