"""Nothing writes into a pushed version once it is in place: the model card, the TFLite models
and the evaluation arrive with the model in the one rename of its staging folder, the push
records all of them, and an unchanged re-run leaves every file of the version untouched.

A rename sets the moved folder's change time (ctime) and leaves its modification time (mtime);
any file created in the folder later moves both, and a file written later has an mtime past
the folder's ctime. So a version whose folder's mtime is still before its ctime, and whose
files all predate that ctime, got nothing after its rename."""

import json
import os

import pytest

from components.serving import pusher
from components.serving.model_card_reader import CARD_JSON, CARD_MARKDOWN
from pipeline.lineage import run_record
from pipeline.runners.local import open_store, run_local
from tests.pipeline.tiny_pipeline import tiny_config, write_images

pytestmark = pytest.mark.slow


def _tree(folder: str) -> dict[str, tuple[int, int, int, int]]:
    """Every entry under folder: (inode, size, mtime, ctime), links not followed."""
    found = {}
    for directory, names, files in os.walk(folder):
        for name in names + files:
            path = os.path.join(directory, name)
            info = os.lstat(path)
            found[os.path.relpath(path, folder)] = (
                info.st_ino,
                info.st_size,
                info.st_mtime_ns,
                info.st_ctime_ns,
            )
    return found


def test_the_card_and_tflite_models_arrive_with_the_push_and_nothing_writes_after(tmp_path):
    config = tiny_config(write_images(tmp_path / "images"), tmp_path / "build")
    first = run_local(config)
    version = first.pushed_to
    assert version and first.model_card == version

    renamed = os.stat(version).st_ctime_ns
    assert os.stat(version).st_mtime_ns < renamed  # no entry added to it after the rename
    tree = _tree(version)
    late = [name for name, (_, _, mtime, ctime) in tree.items() if max(mtime, ctime) > renamed]
    assert late == []
    with open(os.path.join(version, CARD_JSON)) as handle:
        card = json.load(handle)
    tflite = [os.path.join("tflite", name) for name in card["tflite"]["files"].values()]
    assert tflite and all(name in tree for name in tflite)

    # The push recorded every file it put there: card, TFLite models, evaluation, model.
    store = open_store(config.metadata_path)
    [pushed] = store.get_artifacts_by_id([first.pushed_model_id])
    recorded = json.loads(pushed.custom_properties[pusher.PUSHED_FILES].string_value)
    files = {name for name in tree if os.path.isfile(os.path.join(version, name))}
    assert set(recorded) == files
    assert {CARD_JSON, CARD_MARKDOWN, *tflite, pusher.SAVED_MODEL_FILE} <= files
    assert pusher.version_problems(version, json.dumps(recorded)) == []

    second = run_local(config)  # unchanged: answered from the cache, the version untouched
    states = {c.node: c.state for c in second.components}
    assert states["Pusher"] == states["ModelCardGen"] == "cached"
    assert second.pushed_to == version and second.model_card == version
    assert _tree(version) == tree
    assert os.stat(version).st_ctime_ns == renamed
    assert run_record(store, config.name, second.run_id).model_card == version
