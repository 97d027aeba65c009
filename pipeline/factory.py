"""create_pipeline(): a pure factory from a validated config to a TFX pipeline.

It reads nothing and writes nothing; runners compute what needs the environment (such as the
input fingerprint) and bind the result to an orchestrator.
"""

from __future__ import annotations

from tfx import v1 as tfx

from components.anomalies_gate import AnomaliesGate
from components.image_example_gen import ImageExampleGen
from pipeline.config import PipelineConfig


def create_pipeline(config: PipelineConfig, input_fingerprint: str) -> tfx.dsl.Pipeline:
    example_gen = ImageExampleGen(
        ingest_config=config.ingest.to_json(), input_fingerprint=input_fingerprint
    )
    statistics_gen = tfx.components.StatisticsGen(examples=example_gen.outputs["examples"])
    schema_gen = tfx.components.SchemaGen(statistics=statistics_gen.outputs["statistics"])
    example_validator = tfx.components.ExampleValidator(
        statistics=statistics_gen.outputs["statistics"], schema=schema_gen.outputs["schema"]
    )
    anomalies_gate = AnomaliesGate(anomalies=example_validator.outputs["anomalies"])
    return tfx.dsl.Pipeline(
        pipeline_name=config.name,
        pipeline_root=config.pipeline_root,
        components=[example_gen, statistics_gen, schema_gen, example_validator, anomalies_gate],
        enable_cache=config.enable_cache,
        metadata_connection_config=tfx.orchestration.metadata.sqlite_metadata_connection_config(
            config.metadata_path
        ),
        beam_pipeline_args=list(config.beam_args),
    )
