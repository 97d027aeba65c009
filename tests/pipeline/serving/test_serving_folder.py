"""Before a run: a push whose folder no longer holds it is marked so the Pusher runs again, and
what no push finished is removed, each with a line."""

import json
import os

from ml_metadata.metadata_store import metadata_store
from ml_metadata.proto import metadata_store_pb2 as mlmd_pb2

from components.serving import pusher
from pipeline.serving.serving_folder import repair_serving_folder


def _store() -> metadata_store.MetadataStore:
    config = mlmd_pb2.ConnectionConfig()
    config.fake_database.SetInParent()
    return metadata_store.MetadataStore(config)


def _record_push(store, folder: str, files: dict) -> int:
    type_id = store.put_artifact_type(mlmd_pb2.ArtifactType(name="PushedModel"))
    artifact = mlmd_pb2.Artifact(type_id=type_id, uri="/archive", state=mlmd_pb2.Artifact.LIVE)
    artifact.custom_properties[pusher.PUSHED].int_value = 1
    artifact.custom_properties[pusher.DESTINATION].string_value = folder
    artifact.custom_properties[pusher.PUSHED_FILES].string_value = json.dumps(files)
    [artifact_id] = store.put_artifacts([artifact])
    return artifact_id


def _version(folder) -> dict:
    os.makedirs(folder / "variables")
    (folder / pusher.SAVED_MODEL_FILE).write_bytes(b"graph")
    (folder / pusher.VARIABLES_INDEX).write_bytes(b"index")
    return pusher.file_manifest(str(folder))


def test_a_push_that_lost_its_variables_is_marked_and_its_folder_removed(tmp_path):
    store = _store()
    base = tmp_path / "serving" / "pipe"
    files = _version(base / "100")
    damaged = _record_push(store, str(base / "100"), files)
    healthy = _record_push(store, str(base / "101"), _version(base / "101"))
    elsewhere = _record_push(store, str(tmp_path / "other" / "1"), files)  # another pipeline's
    os.remove(base / "100" / pusher.VARIABLES_INDEX)
    (base / f"{pusher.TEMPORARY_PREFIX}x").mkdir()

    lines = repair_serving_folder(store, str(base))

    states = {a.id: a.state for a in store.get_artifacts_by_id([damaged, healthy, elsewhere])}
    assert states == {
        damaged: mlmd_pb2.Artifact.DELETED,
        healthy: mlmd_pb2.Artifact.LIVE,
        elsewhere: mlmd_pb2.Artifact.LIVE,
    }
    assert lines == [
        f"pushed model {base / '100'} no longer holds what was pushed "
        "(variables/variables.index is missing): it is pushed again",
        f"removed {base / f'{pusher.TEMPORARY_PREFIX}x'}: a push that did not finish, "
        "or an incomplete model",
        f"removed {base / '100'}: a push that did not finish, or an incomplete model",
    ]
    assert sorted(os.listdir(base)) == ["101"]
    assert repair_serving_folder(store, str(base)) == []  # nothing left to do


def test_a_serving_folder_that_does_not_exist_needs_nothing(tmp_path):
    assert repair_serving_folder(_store(), str(tmp_path / "none")) == []
