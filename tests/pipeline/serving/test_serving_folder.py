"""Before a run: a push whose folder no longer holds it is marked so the Pusher runs again and
its folder is moved aside; only the staging folders of this pipeline's finished runs are
removed; whatever else the serving folder holds (links, other tools' folders, other runs'
pushes) stays byte for byte."""

import hashlib
import json
import os

from ml_metadata.metadata_store import metadata_store
from ml_metadata.proto import metadata_store_pb2 as mlmd_pb2

from components import metadata_keys
from components.serving import pusher
from pipeline import run_guard
from pipeline.serving.serving_folder import repair_serving_folder

PIPELINE = "pipe"


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


def _record_run(store, run_id: str, state: str, pipeline: str = PIPELINE) -> None:
    holder = run_guard.Holder(1, "host", "2026-01-01T00:00:00+00:00")
    run_guard.begin_run(store, run_id, pipeline, holder)
    if state != metadata_keys.STATE_RUNNING:
        run_guard.end_run(store, run_id, state)


def legacy_push(store, pipeline: str, run_id: str, pipeline_root: str, state) -> str:
    """A Pusher execution as TFX's legacy launcher (Airflow) records it, in a run context of
    pipeline; returns the name its push staged under (its executor got no run id)."""
    from pipeline.lineage import store as names

    run_type = store.put_context_type(
        mlmd_pb2.ContextType(
            name=names.LEGACY_RUN_CONTEXT,
            properties={
                names.LEGACY_PIPELINE_PROPERTY: mlmd_pb2.STRING,
                names.LEGACY_RUN_ID_PROPERTY: mlmd_pb2.STRING,
            },
        ),
        can_add_fields=True,
    )
    execution_type = store.put_execution_type(
        mlmd_pb2.ExecutionType(
            name="components.serving.pusher.Pusher",
            properties={
                names.LEGACY_COMPONENT_PROPERTY: mlmd_pb2.STRING,
                names.LEGACY_PIPELINE_ROOT_PROPERTY: mlmd_pb2.STRING,
            },
        ),
        can_add_fields=True,
    )
    run = store.get_context_by_type_and_name(names.LEGACY_RUN_CONTEXT, f"{pipeline}.{run_id}")
    if run is None:
        run = mlmd_pb2.Context(type_id=run_type, name=f"{pipeline}.{run_id}")
        run.properties[names.LEGACY_PIPELINE_PROPERTY].string_value = pipeline
        run.properties[names.LEGACY_RUN_ID_PROPERTY].string_value = run_id
        [run.id] = store.put_contexts([run])
    execution = mlmd_pb2.Execution(type_id=execution_type, last_known_state=state)
    execution.properties[names.LEGACY_COMPONENT_PROPERTY].string_value = "Pusher"
    execution.properties[names.LEGACY_PIPELINE_ROOT_PROPERTY].string_value = pipeline_root
    execution_id, _, _ = store.put_execution(execution, [], [run])
    output = os.path.join(pipeline_root, "Pusher", "pushed_model", str(execution_id))
    return pusher.output_staging_name(output)


def _version(folder) -> dict:
    os.makedirs(folder / "variables")
    (folder / pusher.SAVED_MODEL_FILE).write_bytes(b"graph")
    (folder / pusher.VARIABLES_INDEX).write_bytes(b"index")
    return pusher.file_manifest(str(folder))


def _snapshot(root) -> dict:
    """Every entry under root, links not followed: kind and content digest or link target."""
    found = {}
    for directory, folders, names in os.walk(root):
        for name in folders + names:
            path = os.path.join(directory, name)
            if os.path.islink(path):
                found[path] = ("link", os.readlink(path))
            elif os.path.isdir(path):
                found[path] = ("dir",)
            else:
                with open(path, "rb") as handle:
                    found[path] = ("file", hashlib.sha256(handle.read()).hexdigest())
    return found


def test_a_changed_push_is_marked_and_moved_aside_and_the_newest_whole_one_serves(tmp_path):
    store = _store()
    base = tmp_path / "serving" / PIPELINE
    healthy = _record_push(store, str(base / "100"), _version(base / "100"))
    flipped = _record_push(store, str(base / "101"), _version(base / "101"))
    elsewhere = _record_push(store, str(tmp_path / "other" / "1"), _version(tmp_path / "o"))
    (base / "101" / pusher.VARIABLES_INDEX).write_bytes(b"indey")  # one bit, the same size

    lines = repair_serving_folder(store, str(base), PIPELINE)

    states = {a.id: a.state for a in store.get_artifacts_by_id([healthy, flipped, elsewhere])}
    assert states == {
        healthy: mlmd_pb2.Artifact.LIVE,
        flipped: mlmd_pb2.Artifact.DELETED,
        elsewhere: mlmd_pb2.Artifact.LIVE,
    }
    assert lines[0].startswith(f"pushed model {base / '101'} no longer holds what was pushed ")
    assert "variables/variables.index differs (SHA-256 " in lines[0]
    assert lines[0].endswith(
        f": moved aside to {base / '101.broken'}; it is pushed again when its model is still "
        "blessed"
    )
    assert lines[1:] == [f"version 100 of {base} serves now"]
    assert sorted(os.listdir(base)) == [".imgpipe-serving.lock", "100", "101.broken"]
    assert (base / "101.broken" / pusher.VARIABLES_INDEX).read_bytes() == b"indey"
    assert repair_serving_folder(store, str(base), PIPELINE) == []  # nothing left to do


def test_only_the_staging_folders_of_finished_runs_of_this_store_are_removed(tmp_path):
    store = _store()
    base = tmp_path / "serving" / PIPELINE
    outside = tmp_path / "deployed"
    (outside / "keep").mkdir(parents=True)
    (outside / "keep" / "model.tflite").write_bytes(b"another team's model")
    base.mkdir(parents=True)
    os.symlink(outside, base / "7")  # a version deployed by a link, no SavedModel in it
    (base / "8").mkdir()  # another tool's numbered folder
    (base / "8" / "model.tflite").write_bytes(b"tflite")
    (base / ".pushing-x").write_bytes(b"a file")
    (base / pusher.staging_name("other-store-run")).mkdir()
    _record_run(store, "running-run", metadata_keys.STATE_RUNNING)
    (base / pusher.staging_name("running-run")).mkdir()
    _record_run(store, "other-pipeline-run", metadata_keys.STATE_FAILED, pipeline="other")
    (base / pusher.staging_name("other-pipeline-run")).mkdir()
    _record_run(store, "2026-01-01T10:00:00.5", metadata_keys.STATE_FAILED)
    os.symlink(outside, base / pusher.staging_name("2026-01-01T10:00:00.5"))
    _record_run(store, "2026-01-01T11:00:00.5", metadata_keys.STATE_INTERRUPTED)
    staged = base / pusher.staging_name("2026-01-01T11:00:00.5")
    (staged / "variables").mkdir(parents=True)
    os.symlink(outside / "keep", staged / "variables" / "link")
    before = _snapshot(tmp_path)

    lines = repair_serving_folder(store, str(base), PIPELINE)

    assert lines == [f"removed {staged}: the staging folder of a push that did not finish"]
    after = _snapshot(tmp_path)
    removed = {path for path in before if path.startswith(str(staged))}
    assert {p: v for p, v in before.items() if p not in removed} == {
        p: v for p, v in after.items() if not p.endswith(".imgpipe-serving.lock")
    }


def test_airflow_pushes_that_are_over_have_their_staging_folders_removed_and_no_other(tmp_path):
    """Under Airflow a push stages under the name of its output folder; only those of this
    pipeline's executions that are over, in this store (its pipeline root), are removed."""
    store = _store()
    base = tmp_path / "serving" / PIPELINE
    root = str(tmp_path / "build" / "tfx")
    done = legacy_push(store, PIPELINE, "scheduled__1", root, mlmd_pb2.Execution.COMPLETE)
    failed = legacy_push(store, PIPELINE, "scheduled__2", root, mlmd_pb2.Execution.FAILED)
    running = legacy_push(store, PIPELINE, "scheduled__3", root, mlmd_pb2.Execution.RUNNING)
    other = legacy_push(store, "other", "scheduled__1", root, mlmd_pb2.Execution.COMPLETE)
    # Another store's push into the same root: same execution id, another pipeline root.
    elsewhere = pusher.output_staging_name(
        os.path.join(str(tmp_path / "other-build"), "Pusher", "pushed_model", "1")
    )
    for name in (done, failed, running, other, elsewhere):
        (base / name / "variables").mkdir(parents=True)
    before = _snapshot(tmp_path)

    lines = repair_serving_folder(store, str(base), PIPELINE)

    removed = [base / done, base / failed]
    assert sorted(lines) == sorted(
        f"removed {path}: the staging folder of a push that did not finish" for path in removed
    )
    assert sorted(os.listdir(base)) == sorted([".imgpipe-serving.lock", running, other, elsewhere])
    kept = {p: v for p, v in before.items() if not p.startswith((str(removed[0]), str(removed[1])))}
    assert kept == {p: v for p, v in _snapshot(tmp_path).items() if not p.endswith(".lock")}


def test_a_push_whose_folder_became_a_link_is_marked_and_the_link_left_alone(tmp_path):
    store = _store()
    base = tmp_path / "serving" / PIPELINE
    files = _version(tmp_path / "elsewhere")
    base.mkdir(parents=True)
    os.symlink(tmp_path / "elsewhere", base / "100")
    pushed = _record_push(store, str(base / "100"), files)

    lines = repair_serving_folder(store, str(base), PIPELINE)

    assert store.get_artifacts_by_id([pushed])[0].state == mlmd_pb2.Artifact.DELETED
    assert lines[0] == (
        f"pushed model {base / '100'} no longer holds what was pushed (the folder is a link "
        "now); it is pushed again when its model is still blessed"
    )
    assert os.path.islink(base / "100") and (tmp_path / "elsewhere" / "variables").is_dir()


def test_a_serving_folder_that_does_not_exist_needs_nothing(tmp_path):
    assert repair_serving_folder(_store(), str(tmp_path / "none"), PIPELINE) == []
    assert not (tmp_path / "none").exists()
