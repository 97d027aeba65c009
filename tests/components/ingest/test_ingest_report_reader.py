"""The ingest report's reader on an artifact recorded as ImageExampleGen records it
(tests/components/ingest/test_image_example_gen.py reads a real one)."""

import json

from ml_metadata.proto import metadata_store_pb2 as mlmd_pb2

from components import metadata_keys
from components.ingest.ingest_report_reader import IngestReportRecord
from data_prep.ingest import IngestOutputs


def test_reads_counts_label_map_and_where_the_files_are():
    artifact = mlmd_pb2.Artifact(uri="/root/ImageExampleGen/ingest_report/4")
    properties = artifact.custom_properties
    for name, count in zip(metadata_keys.INGEST_COUNTS, (12, 9, 2, 1), strict=True):
        properties[name].int_value = count
    properties[metadata_keys.LABEL_MAP_PROPERTY].string_value = json.dumps({"cat": 0, "dog": 1})
    properties[metadata_keys.CLASSES_LEFT_OUT_PROPERTY].string_value = json.dumps(["owl"])
    properties[metadata_keys.INGEST_INPUT_PROPERTY].string_value = "/data/pets"
    properties[metadata_keys.INGEST_SPAN_PROPERTY].int_value = 2
    record = IngestReportRecord.read(artifact)
    assert record.counts == {"found": 12, "accepted": 9, "rejected": 2, "ignored": 1}
    assert record.label_map == {"cat": 0, "dog": 1}
    assert record.classes_left_out == ("owl",)
    assert (record.input, record.span) == ("/data/pets", 2)
    layout = IngestOutputs.under(artifact.uri)
    assert record.report_path == layout.report_path
    assert record.source_index_path == layout.source_index_path


def test_an_artifact_without_properties_reads_as_empty():
    record = IngestReportRecord.read(mlmd_pb2.Artifact(uri="/r"))
    assert (record.counts, record.label_map, record.classes_left_out) == ({}, {}, ())
    assert (record.input, record.span) == (None, None)
