"""CuratedSchemaGen: the schema inferred from a pipeline's first span, curated into a contract.

SchemaGen's inference turns every string feature with few values into an enumeration, so on a
small span each image's `sha256` and `source_path` become allowed values and the next span fails
on all of them; and re-inferring each span (what SchemaGen does) accepts whatever arrives. The
curated schema keeps what inference gets right (types, presence, shapes) and decides the value
rules: `image_format` may be any format the ingest writes, `height` and `width` are positive and
within the ingest's limits, every other feature (hashes, paths, image bytes, labels) has no value
domain. The class set is not a schema rule: the data gate compares it with the reference label
map, which also notices a class that vanished and obeys the class-change policy.
"""

import os

import tensorflow_data_validation as tfdv
from tensorflow_metadata.proto.v0 import schema_pb2
from tfx.components.statistics_gen import stats_artifact_utils
from tfx.dsl.component.experimental.annotations import InputArtifact, OutputArtifact, Parameter
from tfx.dsl.component.experimental.decorators import component
from tfx.types import standard_artifacts
from tfx.utils import io_utils

from components.metadata_keys import SCHEMA_FILE
from data_prep.contract import features

ANALYZED_SPLIT = "train"


def curate_schema(inferred: schema_pb2.Schema, max_side: int) -> schema_pb2.Schema:
    """The contract from an inferred schema (see the module docstring); max_side bounds
    height and width."""
    schema = schema_pb2.Schema()
    schema.CopyFrom(inferred)
    del schema.string_domain[:]  # global enumerations inferred from the span's values
    for feature in schema.feature:
        feature.ClearField("domain_info")
        if feature.name == features.IMAGE_FORMAT:
            feature.string_domain.value.extend(features.IMAGE_FORMATS)
        elif feature.name in (features.HEIGHT, features.WIDTH):
            feature.int_domain.min = 1
            feature.int_domain.max = max_side
    return schema


@component
def CuratedSchemaGen(  # noqa: N802  TFX component names are classes
    statistics: InputArtifact[standard_artifacts.ExampleStatistics],
    schema: OutputArtifact[standard_artifacts.Schema],
    max_side: Parameter[int],
) -> None:
    """Infers the schema of the train split's statistics (as SchemaGen) and curates it."""
    stats = stats_artifact_utils.load_statistics(statistics, ANALYZED_SPLIT).proto()
    inferred = tfdv.infer_schema(stats, infer_feature_shape=True)
    io_utils.write_pbtxt_file(
        os.path.join(schema.uri, SCHEMA_FILE), curate_schema(inferred, max_side)
    )
