"""imgpipe's own artifact types, one place for all of them; their type names live in
metadata_keys so that readers without TFX can name them."""

from tfx.types import artifact

from components import metadata_keys


class IngestReport(artifact.Artifact):
    """Every input file's fate (accepted, rejected with a reason, ignored) and the label map;
    read back by components/ingest/ingest_report_reader.py."""

    TYPE_NAME = metadata_keys.INGEST_REPORT_TYPE


class DataVerdict(artifact.Artifact):
    """A span that passed the gate, with the class change the policy allowed, if any."""

    TYPE_NAME = metadata_keys.DATA_VERDICT_TYPE


class EvaluationReport(artifact.Artifact):
    """Per-class metrics, confusion matrix and misclassified eval images of one model."""

    TYPE_NAME = metadata_keys.EVALUATION_REPORT_TYPE


class TFLiteModel(artifact.Artifact):
    """TFLite models of a trained Model and how closely they match it on the eval split."""

    TYPE_NAME = metadata_keys.TFLITE_MODEL_TYPE


class ModelCard(artifact.Artifact):
    """model_card.json and model_card.md of one model; read back by model_card_reader.py."""

    TYPE_NAME = metadata_keys.MODEL_CARD_TYPE


class DataHealth(artifact.Artifact):
    """Near-duplicate clusters, odd images and likely label errors of one dataset; read back
    by components/validation/data_health.py read_health."""

    TYPE_NAME = metadata_keys.DATA_HEALTH_TYPE
