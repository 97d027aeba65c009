"""The pipeline's node ids, as tests expect create_pipeline() to wire them."""

COMPONENTS = (
    "ImageExampleGen",
    "baseline_model_resolver",
    "StatisticsGen",
    "SchemaGen",
    "ExampleValidator",
    "AnomaliesGate",
    "Transform",
    "Trainer",
    "Evaluator",
    "ServingCheck",
    "TFLiteExport",
    "EvaluationReportGen",
    "Pusher",
    "ModelCardGen",
)
