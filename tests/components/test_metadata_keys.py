"""The names lineage reads are the names the components (and TFX) write."""

from tfx.components.evaluator import constants as evaluator_constants
from tfx.components.pusher import executor as pusher_executor
from tfx.dsl.compiler import constants as compiler_constants

from components import metadata_keys
from components.artifacts import (
    DataHealth,
    EvaluationReport,
    IngestReport,
    ModelCard,
    TFLiteModel,
)
from components.ingest.image_example_gen import ImageExampleGen
from components.serving.model_card import ModelCardGen
from components.validation import data_gate
from components.validation.data_health import DataHealthGen


def test_tfx_names_restated_without_importing_tfx_equal_tfx_constants():
    assert metadata_keys.BLESSED_PROPERTY == evaluator_constants.ARTIFACT_PROPERTY_BLESSED_KEY
    assert (
        metadata_keys.CURRENT_MODEL_ID_PROPERTY
        == evaluator_constants.ARTIFACT_PROPERTY_CURRENT_MODEL_ID_KEY
    )
    assert metadata_keys.PUSHED_PROPERTY == pusher_executor._PUSHED_KEY
    assert metadata_keys.PUSHED_DESTINATION_PROPERTY == pusher_executor._PUSHED_DESTINATION_KEY
    assert metadata_keys.PIPELINE_CONTEXT == compiler_constants.PIPELINE_CONTEXT_TYPE_NAME
    assert metadata_keys.RUN_CONTEXT == compiler_constants.PIPELINE_RUN_CONTEXT_TYPE_NAME


def test_artifact_types_are_the_components_own():
    assert IngestReport.TYPE_NAME == metadata_keys.INGEST_REPORT_TYPE
    assert EvaluationReport.TYPE_NAME == metadata_keys.EVALUATION_REPORT_TYPE
    assert TFLiteModel.TYPE_NAME == metadata_keys.TFLITE_MODEL_TYPE
    assert ModelCard.TYPE_NAME == metadata_keys.MODEL_CARD_TYPE
    assert DataHealth.TYPE_NAME == metadata_keys.DATA_HEALTH_TYPE
    assert data_gate.DataVerdict.TYPE_NAME == metadata_keys.DATA_VERDICT_TYPE


def test_output_keys_and_parameters_are_the_components_own():
    assert metadata_keys.INGEST_REPORT_OUTPUT_KEY in ImageExampleGen.SPEC_CLASS.OUTPUTS
    assert metadata_keys.INGEST_CONFIG_PARAMETER in ImageExampleGen.SPEC_CLASS.PARAMETERS
    assert metadata_keys.MODEL_CARD_OUTPUT_KEY in ModelCardGen.SPEC_CLASS.OUTPUTS
    assert metadata_keys.DATA_VERDICT_OUTPUT_KEY in data_gate.DataGateSpec.OUTPUTS
    assert metadata_keys.DATA_HEALTH_OUTPUT_KEY in DataHealthGen.SPEC_CLASS.OUTPUTS
