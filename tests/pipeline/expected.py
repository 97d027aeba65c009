"""The pipeline's node ids, as tests expect create_pipeline() to wire them on a pipeline's first
span (later spans import the schema decided then: SCHEMA_IMPORTER replaces CuratedSchemaGen)."""

COMPONENTS = (
    "ImageExampleGen",
    "baseline_model_resolver",
    "StatisticsGen",
    "CuratedSchemaGen",
    "ExampleValidator",
    "drift_baseline_resolver",
    "DistributionValidator",
    "DataGate",
    "Transform",
    "Trainer",
    "Evaluator",
    "ServingCheck",
    "TFLiteExport",
    "EvaluationReportGen",
    "DataHealthGen",
    "ModelCardGen",
    "Pusher",
)
SCHEMA_IMPORTER = "schema_importer"
DRIFT_NODES = ("drift_baseline_resolver", "DistributionValidator")  # on every orchestrator
