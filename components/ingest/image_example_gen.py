"""ImageExampleGen: the ingest Beam job as a TFX component, so the CLI and the pipeline share one
code path.

It writes a standard Examples artifact (Split-<name>/ gzip TFRecords of tf.Examples, split names,
payload and file format) that StatisticsGen, SchemaGen, Transform and the Trainer read unchanged,
and an IngestReport artifact (every file's fate, counts and the label map) recorded in MLMD.
"""

import json

import apache_beam as beam
from tfx.components.util import examples_utils
from tfx.dsl.component.experimental.annotations import (
    BeamComponentParameter,
    OutputArtifact,
    Parameter,
)
from tfx.dsl.component.experimental.decorators import component
from tfx.proto import example_gen_pb2
from tfx.types import artifact_utils, standard_artifacts

from components import metadata_keys
from components.artifacts import IngestReport
from data_prep.ingest import (
    IngestImages,
    IngestOutputs,
    prepare_ingest,
    previous_splits,
    read_ingest_report,
)
from data_prep.ingest_config import IngestConfig
from data_prep.runtime import parallel


@component(use_beam=True)
def ImageExampleGen(  # noqa: N802  TFX component names are classes
    ingest_config: Parameter[str],
    input_fingerprint: Parameter[str],
    span: Parameter[int],
    reference_label_map: Parameter[str],
    previous_source_index: Parameter[str],
    examples: OutputArtifact[standard_artifacts.Examples],
    ingest_report: OutputArtifact[IngestReport],
    beam_pipeline: BeamComponentParameter[beam.Pipeline] = None,
) -> None:
    """Ingests a folder of class folders or a manifest.

    Args:
      ingest_config: IngestConfig.to_json(), validated when the pipeline is built.
      input_fingerprint: sources.input_fingerprint(input) at pipeline build time: part of the
        execution's identity, so new or changed images invalidate the cache.
      span: the data drop this ingest is (see pipeline/validation/data_snapshot.py), set on
        the Examples.
      reference_label_map: JSON of the pipeline's label ids ("{}" for its first span), which
        known classes keep (data_prep/contract/label_map.py).
      previous_source_index: the source index of the span before ("" for the first span): each
        image it lists keeps its split, and new copies of it follow it.
    """
    config = IngestConfig.from_json(ingest_config)
    outputs = IngestOutputs.under(ingest_report.uri, examples_dir=examples.uri)
    sources = prepare_ingest(config, outputs)
    try:
        with beam_pipeline as pipeline:
            _ = pipeline | "IngestImages" >> IngestImages(
                sources,
                config,
                outputs,
                json.loads(reference_label_map),
                previous_splits(previous_source_index),
            )
    finally:
        parallel.release_pools()  # the rest of the run has no use for the ingest's children
    describe_ingest(read_ingest_report(outputs), config.input, examples, ingest_report)
    examples.span = span
    examples.set_string_custom_property(metadata_keys.INPUT_FINGERPRINT_PROPERTY, input_fingerprint)
    ingest_report.set_int_custom_property(metadata_keys.INGEST_SPAN_PROPERTY, span)


def describe_ingest(
    report: dict,
    ingested: str,
    examples: standard_artifacts.Examples,
    ingest_report: IngestReport,
) -> None:
    """What the ingest's two artifacts carry in ML Metadata: the splits, formats and label map
    on the Examples; the counts, the input, the label map, the classes left out and the
    near-duplicate share on the IngestReport. `ingested`: the folder or manifest."""
    examples.split_names = artifact_utils.encode_split_names(sorted(report["accepted_per_split"]))
    examples_utils.set_payload_format(examples, example_gen_pb2.PayloadFormat.FORMAT_TF_EXAMPLE)
    examples_utils.set_file_format(examples, "tfrecords_gzip")
    label_map = json.dumps(report["label_map"], sort_keys=True)
    examples.set_string_custom_property(metadata_keys.LABEL_MAP_PROPERTY, label_map)
    for name, count in report["totals"].items():
        ingest_report.set_int_custom_property(name, count)
    ingest_report.set_string_custom_property(metadata_keys.INGEST_INPUT_PROPERTY, ingested)
    ingest_report.set_string_custom_property(metadata_keys.LABEL_MAP_PROPERTY, label_map)
    ingest_report.set_string_custom_property(
        metadata_keys.CLASSES_LEFT_OUT_PROPERTY, json.dumps(report["classes_left_out"])
    )
    ingest_report.set_float_custom_property(
        metadata_keys.NEAR_DUPLICATE_FRACTION_PROPERTY, report["near_duplicate_share"]["fraction"]
    )
