"""The Pusher: a version folder appears whole (the model, its card, TFLite models and evaluation)
and verified or not at all, also when the disk fills mid-copy; a push that did not happen
raises, what it pushed is recorded and later checked by SHA-256, and it stages only in a
folder it created."""

import json
import os
import shutil
import subprocess
import sys
import textwrap

import pytest
from google.protobuf import json_format
from tfx.proto import pusher_pb2
from tfx.types import standard_artifacts

from components.artifacts import ModelCard
from components.serving import pusher, serving_root
from components.training import serving_assets
from tests.components.training.conftest import LABEL_NAMES

SERVING = "Format-Serving"


def _model_dir(model_artifact) -> str:
    return os.path.join(model_artifact.uri, SERVING)


def _broken_copy(model_artifact, root) -> str:
    """A copy of the export whose label file names one class too few: it loads, answers wrong."""
    broken = str(root / "broken")
    shutil.copytree(_model_dir(model_artifact), broken)
    labels = os.path.join(broken, serving_assets.ASSETS_EXTRA, serving_assets.LABELS_FILE)
    with open(labels, "w") as handle:
        handle.write("".join(f"{name}\n" for name in LABEL_NAMES[:2]))
    return broken


def _beside(root, tflite_bytes: int = 1000) -> str:
    """A ModelCard folder as ModelCardGen writes it: the files that go beside the model."""
    folder = root / "card"
    (folder / "tflite").mkdir(parents=True)
    (folder / "model_card.md").write_text("# Model card\n")
    (folder / "model_card.json").write_text("{}")
    (folder / "tflite" / "model_float32.tflite").write_bytes(os.urandom(tflite_bytes))
    return str(folder)


def _do(model, blessed: int, base, root) -> standard_artifacts.PushedModel:
    model_blessing = standard_artifacts.ModelBlessing()
    model_blessing.set_int_custom_property("blessed", blessed)
    infra_blessing = standard_artifacts.InfraBlessing()
    infra_blessing.set_int_custom_property("blessed", 1)
    pushed = standard_artifacts.PushedModel()
    pushed.uri = str(root / "pushed")
    card = ModelCard()
    card.uri = _beside(root)
    destination = pusher_pb2.PushDestination(
        filesystem=pusher_pb2.PushDestination.Filesystem(base_directory=str(base))
    )
    pusher.Executor().Do(
        {
            "model": [model],
            "model_blessing": [model_blessing],
            "infra_blessing": [infra_blessing],
            pusher.BESIDE_KEY: [card],
        },
        {"pushed_model": [pushed]},
        {"push_destination": json_format.MessageToJson(destination)},
    )
    return pushed


@pytest.mark.slow
def test_a_blessed_model_is_pushed_whole_and_recorded_with_its_files(model_artifact, tmp_path):
    pushed = _do(model_artifact, 1, tmp_path / "serving", tmp_path)

    assert pushed.get_int_custom_property(pusher.PUSHED) == 1
    version = pushed.get_string_custom_property(pusher.VERSION)
    folder = pushed.get_string_custom_property(pusher.DESTINATION)
    assert folder == str(tmp_path / "serving" / version)
    assert sorted(os.listdir(tmp_path / "serving")) == [serving_root.LOCK_FILE, version]
    files = json.loads(pushed.get_string_custom_property(pusher.PUSHED_FILES))
    beside = pusher.file_manifest(str(tmp_path / "card"))
    assert files == {**pusher.file_manifest(_model_dir(model_artifact)), **beside}
    assert {pusher.SAVED_MODEL_FILE, pusher.VARIABLES_INDEX} <= set(files)
    assert {"model_card.md", "model_card.json", "tflite/model_float32.tflite"} <= set(files)
    assert pusher.version_problems(folder, json.dumps(files)) == []
    assert os.path.isfile(os.path.join(pushed.uri, pusher.SAVED_MODEL_FILE))  # the archive


def test_a_model_without_the_evaluators_blessing_is_not_pushed(model_artifact, tmp_path):
    pushed = _do(model_artifact, 0, tmp_path / "serving", tmp_path)
    assert pushed.get_int_custom_property(pusher.PUSHED) == 0
    assert not (tmp_path / "serving").exists()


@pytest.mark.slow
def test_a_copy_that_does_not_serve_in_a_fresh_process_is_not_put_in_place(
    model_artifact, tmp_path
):
    broken = _broken_copy(model_artifact, tmp_path)
    with pytest.raises(pusher.PushError, match=r"does not serve: .*not \(1, 2\)"):
        pusher.push(
            broken, _beside(tmp_path), str(tmp_path / "serving"), pusher.staging_name("run-1")
        )
    assert os.listdir(tmp_path / "serving") == [serving_root.LOCK_FILE]  # no staged copy


def test_a_version_folder_that_appears_meanwhile_is_never_taken_for_a_push(
    model_artifact, tmp_path, monkeypatch
):
    serving = tmp_path / "serving"
    (serving / "100").mkdir(parents=True)
    monkeypatch.setattr(pusher, "serve_problems_in_fresh_process", lambda model_dir: [])
    monkeypatch.setattr(pusher, "next_version", lambda base: "100")
    with pytest.raises(pusher.PushError, match="100 already exists; nothing was pushed"):
        pusher.push(
            _model_dir(model_artifact),
            _beside(tmp_path),
            str(serving),
            pusher.staging_name("run-1"),
        )
    assert sorted(os.listdir(serving)) == [serving_root.LOCK_FILE, "100"]
    assert os.listdir(serving / "100") == []


def test_a_staging_folder_that_exists_is_never_taken_over(model_artifact, tmp_path):
    serving = tmp_path / "serving"
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "data").write_bytes(b"theirs")
    serving.mkdir()
    os.symlink(outside, serving / pusher.staging_name("run:1"))
    with pytest.raises(pusher.PushError, match="exists already; nothing was pushed"):
        pusher.push(
            _model_dir(model_artifact),
            _beside(tmp_path),
            str(serving),
            pusher.staging_name("run:1"),
        )
    assert os.listdir(outside) == ["data"] and (outside / "data").read_bytes() == b"theirs"
    assert os.path.islink(serving / ".pushing-run_1")


def test_versions_count_up_from_the_highest_there(tmp_path):
    (tmp_path / "9999999999").mkdir()
    (tmp_path / "notes").mkdir()
    assert pusher.next_version(str(tmp_path)) == "10000000000"
    assert int(pusher.next_version(str(tmp_path / "notes"))) > 1_700_000_000  # the time


def test_a_pushed_folder_is_checked_against_the_files_pushed(model_artifact, tmp_path):
    folder = str(tmp_path / "1")
    shutil.copytree(_model_dir(model_artifact), folder)
    recorded = json.dumps(pusher.file_manifest(folder))
    assert pusher.version_problems(folder, recorded) == []
    assert pusher.version_problems(folder, None) == []
    with open(os.path.join(folder, "notes.txt"), "w") as handle:
        handle.write("another tool's file, added after the push")
    assert pusher.version_problems(folder, recorded) == []
    shutil.rmtree(os.path.join(folder, "variables"))
    problems = pusher.version_problems(folder, recorded)
    assert "variables/variables.index is missing" in problems
    assert pusher.version_problems(folder, None) == ["variables/variables.index is missing"]
    assert pusher.version_problems(str(tmp_path / "2"), recorded) == ["the folder is gone"]


def test_a_pushed_file_changed_in_one_bit_or_replaced_by_a_link_is_found(model_artifact, tmp_path):
    folder = tmp_path / "1"
    shutil.copytree(_model_dir(model_artifact), folder)
    recorded = json.dumps(pusher.file_manifest(str(folder)))
    data = next((folder / "variables").glob("variables.data-*"))
    original = data.read_bytes()
    content = bytearray(original)
    content[len(content) // 2] ^= 1
    data.write_bytes(bytes(content))
    [problem] = pusher.version_problems(str(folder), recorded)
    assert problem.startswith(f"variables/{data.name} differs (SHA-256 ")
    data.write_bytes(original)
    shutil.copy(folder / pusher.SAVED_MODEL_FILE, tmp_path / "copy.pb")
    os.remove(folder / pusher.SAVED_MODEL_FILE)
    os.symlink(tmp_path / "copy.pb", folder / pusher.SAVED_MODEL_FILE)
    assert f"{pusher.SAVED_MODEL_FILE} is reached through a link" in pusher.version_problems(
        str(folder), recorded
    )


def test_a_name_beside_the_model_that_is_a_file_of_the_model_is_never_pushed(
    model_artifact, tmp_path
):
    beside = _beside(tmp_path)
    with open(os.path.join(beside, pusher.SAVED_MODEL_FILE), "wb") as handle:
        handle.write(b"not the model")
    with pytest.raises(pusher.PushError, match="holds saved_model.pb, a file of the model"):
        pusher.push(_model_dir(model_artifact), beside, str(tmp_path / "s"), ".pushing-run-1")
    assert not (tmp_path / "s").exists()


@pytest.mark.slow
def test_a_disk_that_fills_while_the_tflite_model_is_staged_leaves_live_versions_as_they_were(
    model_artifact, tmp_path
):
    """A real write failure (the file size limit, EFBIG, as a full disk gives ENOSPC) while the
    TFLite model is copied: no version appears, the staging folder is gone and the version
    already served is byte for byte what it was."""
    model_dir = _model_dir(model_artifact)
    largest = max(size for size, _ in pusher.file_manifest(model_dir).values())
    limit = largest + 4096  # every model file fits, the TFLite model does not
    beside = _beside(tmp_path, tflite_bytes=2 * limit)
    serving = tmp_path / "serving"
    shutil.copytree(model_dir, serving / "1")
    live = pusher.file_manifest(str(serving / "1"))
    script = textwrap.dedent(
        f"""
        import resource, signal, sys
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, ({limit}, {limit}))
        from components.serving import pusher
        try:
            pusher.push({model_dir!r}, {beside!r}, {str(serving)!r}, ".pushing-run-1")
        except Exception as error:
            print("failed:", error)
            sys.exit(1)
        """
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True)

    assert done.returncode == 1, done.stderr
    assert "model_float32.tflite" in done.stdout and "File too large" in done.stdout
    assert sorted(os.listdir(serving)) == [serving_root.LOCK_FILE, "1"]
    assert pusher.file_manifest(str(serving / "1")) == live
