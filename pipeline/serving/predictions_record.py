"""`imgpipe predict` in ML Metadata: which model it scores with by default (the newest pushed
one), which artifact a model folder is, and the record of a predictions file: an execution that
read the model (INPUT) and wrote the file (OUTPUT), so the lineage answers which model scored a
file. Only ml_metadata is imported."""

from __future__ import annotations

import json
import os
from typing import TYPE_CHECKING

from ml_metadata.metadata_store import metadata_store
from ml_metadata.proto import metadata_store_pb2 as mlmd_pb2

from components import metadata_keys
from pipeline.lineage.models import find_model, latest_pushed_model
from pipeline.lineage.predictions_edits import written_contents
from pipeline.lineage.store import LineageError, MetadataGraph, same_file
from pipeline.predictions_file import IGNORED, REJECTED, SCORED, PredictionRow

if TYPE_CHECKING:
    from pipeline.serving.labelled import LabelledScore

# Where the Trainer puts the SavedModel inside a Model artifact's folder.
SERVING_MODEL_DIR = "Format-Serving"


def newest_pushed_model(store: metadata_store.MetadataStore) -> tuple[int, str]:
    """The newest pushed model's PushedModel artifact id and the folder it was pushed to."""
    artifact_id = latest_pushed_model(store)
    artifact = MetadataGraph(store).artifact(artifact_id)
    destination = artifact.custom_properties[metadata_keys.PUSHED_DESTINATION_PROPERTY].string_value
    return artifact_id, destination


def model_artifact_id(store: metadata_store.MetadataStore, model_dir: str) -> int | None:
    """The PushedModel pushed to model_dir, or the Model whose SavedModel it is; None when the
    store holds neither."""
    try:
        return find_model(store, model_dir)
    except LineageError:
        pass
    for model in MetadataGraph(store).artifacts_of_type("Model"):
        if model.uri and same_file(os.path.join(model.uri, SERVING_MODEL_DIR), model_dir):
            return model.id
    return None


def record_predictions(
    store: metadata_store.MetadataStore,
    model_id: int,
    output: str,
    rows: list[PredictionRow],
    inputs: list[str],
    min_confidence: float,
    labelled: LabelledScore | None = None,
) -> int:
    """Records the predictions file as an artifact made from the model; returns its id. With
    `labelled`, it records that the files were scored against their labels, and the accuracy.
    The file's SHA-256 and its rows' digests are recorded too (a local file's), so the lineage
    tells which rows were edited since."""
    artifact_type = store.put_artifact_type(
        mlmd_pb2.ArtifactType(name=metadata_keys.PREDICTIONS_TYPE)
    )
    execution_type = store.put_execution_type(
        mlmd_pb2.ExecutionType(name=metadata_keys.PREDICT_EXECUTION_TYPE)
    )
    uri = output if "://" in output else os.path.abspath(output)
    _retire_overwritten(store, artifact_type, uri)
    counts = {
        "files": len(rows),
        "scored": sum(row.status == SCORED for row in rows),
        "low_confidence": sum(row.low_confidence for row in rows),
        "rejected": sum(row.status == REJECTED for row in rows),
        "ignored": sum(row.status == IGNORED for row in rows),
    }
    artifact = mlmd_pb2.Artifact(type_id=artifact_type, uri=uri, state=mlmd_pb2.Artifact.LIVE)
    for name in metadata_keys.PREDICTIONS_COUNTS:
        artifact.custom_properties[name].int_value = counts[name]
    versions = sorted({row.model_version for row in rows if row.model_version})
    artifact.custom_properties[metadata_keys.MODEL_VERSION_PROPERTY].string_value = ",".join(
        versions
    )
    artifact.custom_properties[metadata_keys.MIN_CONFIDENCE_PROPERTY].double_value = min_confidence
    properties = artifact.custom_properties
    properties[metadata_keys.LABELLED_PROPERTY].int_value = int(labelled is not None)
    if labelled is not None:
        properties[metadata_keys.LABELLED_FILES_PROPERTY].int_value = labelled.files
        properties[metadata_keys.LABELLED_ACCURACY_PROPERTY].double_value = labelled.accuracy
    written, digests = written_contents(uri)
    if written is not None:
        properties[metadata_keys.FILE_SHA256_PROPERTY].string_value = written
    execution = mlmd_pb2.Execution(
        type_id=execution_type, last_known_state=mlmd_pb2.Execution.COMPLETE
    )
    execution.custom_properties["inputs"].string_value = json.dumps(inputs)
    if digests is not None:
        execution.custom_properties[metadata_keys.ROW_DIGESTS_PROPERTY].string_value = digests
    made = mlmd_pb2.Event(type=mlmd_pb2.Event.OUTPUT)
    made.path.steps.add().key = metadata_keys.PREDICTIONS_OUTPUT_KEY
    execution_id, (artifact_id,), _ = store.put_execution(execution, [(artifact, made)], [])
    # The model is linked by an event alone: putting the model's artifact with the execution
    # would write it back.
    read = mlmd_pb2.Event(
        type=mlmd_pb2.Event.INPUT, artifact_id=model_id, execution_id=execution_id
    )
    read.path.steps.add().key = metadata_keys.PREDICT_MODEL_KEY
    store.put_events([read])
    return artifact_id


def _retire_overwritten(store: metadata_store.MetadataStore, type_id: int, uri: str) -> None:
    """Marks earlier predictions recorded at uri as deleted: the file now holds other rows, which
    must not be credited to the model that wrote the old ones."""
    overwritten = [
        artifact
        for artifact in store.get_artifacts_by_type(metadata_keys.PREDICTIONS_TYPE)
        if artifact.type_id == type_id
        and artifact.uri == uri
        and artifact.state == mlmd_pb2.Artifact.LIVE
    ]
    for artifact in overwritten:
        artifact.state = mlmd_pb2.Artifact.DELETED
    if overwritten:
        store.put_artifacts(overwritten)
