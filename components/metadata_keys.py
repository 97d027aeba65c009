"""The names imgpipe's components write into ML Metadata and the lineage package reads back:
artifact type names, custom property names and custom_config keys, defined once for writer and
reader. No TFX import here, so `imgpipe runs` and `imgpipe lineage` can name what they look for
without loading TensorFlow; tests/components/test_metadata_keys.py proves the names restated from
TFX equal TFX's own constants."""

# imgpipe's own artifact types.
INGEST_REPORT_TYPE = "imgpipe.IngestReport"
EVALUATION_REPORT_TYPE = "imgpipe.EvaluationReport"
TFLITE_MODEL_TYPE = "imgpipe.TFLiteModel"
MODEL_CARD_TYPE = "imgpipe.ModelCard"
DATA_HEALTH_TYPE = "imgpipe.DataHealth"

DATA_VERDICT_TYPE = "imgpipe.DataVerdict"
# `imgpipe predict --output`: an execution of PREDICT_EXECUTION_TYPE reads the model it scored
# with (INPUT, under PREDICT_MODEL_KEY) and writes the predictions file (OUTPUT, an artifact of
# PREDICTIONS_TYPE under PREDICTIONS_OUTPUT_KEY), whose custom properties hold the counts.
PREDICTIONS_TYPE = "imgpipe.Predictions"
PREDICT_EXECUTION_TYPE = "imgpipe.Predict"
PREDICT_MODEL_KEY = "model"
PREDICTIONS_OUTPUT_KEY = "predictions"
PREDICTIONS_COUNTS = ("files", "scored", "low_confidence", "rejected", "ignored")
MODEL_VERSION_PROPERTY = "model_version"
MIN_CONFIDENCE_PROPERTY = "min_confidence"
# Predictions custom properties of a labelled evaluation (files with labels were scored against
# them): 1 when it was one, how many labelled files were scored, and their accuracy.
LABELLED_PROPERTY = "labelled"
LABELLED_FILES_PROPERTY = "labelled_files"
LABELLED_ACCURACY_PROPERTY = "labelled_accuracy"
# What a predictions file held when written, to tell edits since: the Predictions artifact's
# SHA-256 of the file, and the Predict execution's digests of its rows
# (pipeline/lineage/predictions_edits.py).
FILE_SHA256_PROPERTY = "sha256"
ROW_DIGESTS_PROPERTY = "row_digests"

# DataGate's output key; DataVerdict custom property: "" or the class change the policy allowed.
DATA_VERDICT_OUTPUT_KEY = "verdict"
CLASS_CHANGE_PROPERTY = "class_change"
# DataVerdict custom properties: JSON list of the image size and brightness distances measured
# against their thresholds ({feature, distance, threshold, passed}; [] when there was no
# baseline), and the classes they were measured on (components/validation/drift_record.py
# ClassScope as JSON; "" when there was no baseline).
DRIFT_DISTANCES_PROPERTY = "drift_distances"
DRIFT_CLASSES_PROPERTY = "drift_classes"
# ImageExampleGen's output key for its IngestReport, and its parameter holding the IngestConfig.
INGEST_REPORT_OUTPUT_KEY = "ingest_report"
INGEST_CONFIG_PARAMETER = "ingest_config"
# IngestReport custom properties: the ingest's counts, and the label map as JSON.
INGEST_COUNTS = ("found", "accepted", "rejected", "ignored")
INGEST_INPUT_PROPERTY = "input"  # the folder or manifest ingested
INGEST_SPAN_PROPERTY = "span"
LABEL_MAP_PROPERTY = "label_map"  # also on the Examples: every executor sizes itself from it
CLASSES_LEFT_OUT_PROPERTY = "classes_left_out"  # class folders with no accepted image (JSON)
# IngestReport custom property: the share of distinct images in near-duplicate clusters.
NEAR_DUPLICATE_FRACTION_PROPERTY = "near_duplicate_fraction"
# DataHealthGen's output key; DataHealth custom properties (counts, and the share above).
DATA_HEALTH_OUTPUT_KEY = "data_health"
DATA_HEALTH_COUNTS = (
    "near_duplicate_clusters",
    "near_duplicate_images",
    "odd_images",
    "label_issues",
    "eval_images_checked",
)
# Examples custom property: runners compare it to number the next span.
INPUT_FINGERPRINT_PROPERTY = "input_fingerprint"
# ModelCardGen's output key; ModelCard custom property: the id of the Model it describes.
MODEL_CARD_OUTPUT_KEY = "model_card"
MODEL_CARD_MODEL_ID_PROPERTY = "model_id"
# Model custom properties carrying the Trainer's performance report start with this.
PERFORMANCE_PROPERTY_PREFIX = "perf_"
# Model custom properties of how its training went (epochs, exported epoch, why it stopped, the
# last validation) start with this; TRAINING_OUTCOME names them, as the training metrics do.
TRAINING_PROPERTY_PREFIX = "training_"
TRAINING_OUTCOME = (
    "epochs",
    "epochs_trained",
    "exported_epoch",
    "best_epoch",
    "restored_best",
    "stop_reason",
    "eval_accuracy",
)
# Model custom property: the id of the Model a warm-started run started from.
WARM_STARTED_FROM_PROPERTY = "warm_started_from_model_id"

# custom_config keys.
CODE_FINGERPRINT_KEY = "code_fingerprint"
TRAINER_CONFIG_KEY = "trainer_config"
# Added by the Trainer's and the Tuner's executors: the class names in id order, from the
# Examples' label map.
CLASS_NAMES_KEY = "class_names"

# TFX's own names (restated: importing TFX loads TensorFlow).
BLESSED_PROPERTY = "blessed"  # tfx.components.evaluator.constants.ARTIFACT_PROPERTY_BLESSED_KEY
CURRENT_MODEL_ID_PROPERTY = "current_model_id"  # ...ARTIFACT_PROPERTY_CURRENT_MODEL_ID_KEY
PUSHED_PROPERTY = "pushed"  # tfx.components.pusher.executor._PUSHED_KEY
PUSHED_DESTINATION_PROPERTY = "pushed_destination"  # ..._PUSHED_DESTINATION_KEY

# TFX's context types of a pipeline and of one of its runs (tfx.dsl.compiler.constants).
PIPELINE_CONTEXT, RUN_CONTEXT = "pipeline", "pipeline_run"

# The run record: imgpipe's custom properties on a pipeline_run context, written before TFX
# starts and when the run ends (ENDED_BY on executions too), and the values of RUN_STATE.
RUN_PIPELINE, RUN_PID, RUN_HOST = "imgpipe_pipeline", "imgpipe_pid", "imgpipe_host"
RUN_STATE, RUN_CONFIG_FILE = "imgpipe_state", "imgpipe_config_file"
RUN_SET = "imgpipe_set"  # the run's --set overrides, a JSON list of 'field=value'
RUN_NAME = "imgpipe_run_name"  # the name or note a user gave the run (--run-name)
ENDED_BY = "imgpipe_ended_by"  # why imgpipe closed a run or an execution
STATE_RUNNING, STATE_COMPLETE = "running", "complete"
STATE_FAILED, STATE_INTERRUPTED = "failed", "interrupted"

# The file a Schema artifact holds (TFX's SchemaGen and ImportSchemaGen write it; restated).
SCHEMA_FILE = "schema.pbtxt"
# `imgpipe audit`: an execution of AUDIT_EXECUTION_TYPE reads the Examples (INPUT, under
# "examples") and writes a DataHealth (OUTPUT, under DATA_HEALTH_OUTPUT_KEY) whose
# AUDIT_FOLDS_PROPERTY says how many folds made it. Given --data, an execution of
# AUDIT_INGEST_EXECUTION_TYPE first writes the Examples and IngestReport (as ImageExampleGen's
# output keys).
AUDIT_EXECUTION_TYPE = "imgpipe.LabelAudit"
AUDIT_INGEST_EXECUTION_TYPE = "imgpipe.AuditIngest"
AUDIT_FOLDS_PROPERTY = "folds"
# The audit's held-out accuracy over every image, that of always answering the most common
# class, whether the first is clearly above the second (1) or not (0, then no suspects are
# listed), and the trainer settings of its models (JSON).
AUDIT_ACCURACY_PROPERTY = "held_out_accuracy"
AUDIT_CHANCE_PROPERTY = "chance_accuracy"
AUDIT_AT_CHANCE_PROPERTY = "at_chance"
AUDIT_TRAINER_PROPERTY = "audit_trainer"
# How the audit scored every image out of sample: a logistic regression per fold on pretrained
# image embeddings, or a network per fold trained by the trainer core.
AUDIT_METHOD_PROPERTY = "audit_method"
AUDIT_EMBEDDINGS = "embeddings"
AUDIT_TRAINING = "training"
AUDIT_METHODS = (AUDIT_EMBEDDINGS, AUDIT_TRAINING)
# `imgpipe models rollback`: an execution recording the serving folder and the version pinned
# there (0 when the pin was removed, so the highest whole version serves).
ROLLBACK_EXECUTION_TYPE = "imgpipe.Rollback"
SERVING_FOLDER_PROPERTY = "serving_folder"
PINNED_VERSION_PROPERTY = "pinned_version"
