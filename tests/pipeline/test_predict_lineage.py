"""`imgpipe predict` over a pipeline's store: it scores with the newest pushed model by default,
records the predictions file linked to that model, and `imgpipe lineage predictions` names the
model that scored an image, by path or by its bytes under another name."""

import json
import os
import shutil

import pytest

from pipeline import lineage
from pipeline.predictions_file import read_rows
from pipeline.serving.predictions_record import newest_pushed_model

pytestmark = pytest.mark.slow


@pytest.fixture()
def store_copy(two_runs, tmp_path):
    """A copy of the shared store, so the predictions recorded here stay out of other tests."""
    copy = tmp_path / "metadata.db"
    shutil.copy(two_runs.config.metadata_path, copy)
    return str(copy)


def _cli(capsys, *command):
    from pipeline.cli import main

    code = main(list(command))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_predictions_are_recorded_and_name_the_model_that_made_them(
    two_runs, store_copy, tmp_path, capsys
):
    from pipeline.runners.local import open_store

    pushed_id, destination = newest_pushed_model(open_store(store_copy))
    version = os.path.basename(destination)
    output = tmp_path / "cats.csv"
    cats = two_runs.images / "cat"

    code, out, err = _cli(
        capsys, "predict", "--data", str(cats), "--output", str(output), "--mlmd-sqlite", store_copy
    )

    assert code == 0, err
    assert f"model {version}" in out
    assert "not an image file" in err and "error" not in err  # cat/notes.txt is ignored
    rows = read_rows(str(output))
    assert {row.file for row in rows} == {str(path) for path in cats.iterdir()}
    assert {row.model_version for row in rows if row.status == "scored"} == {version}

    image = cats / "0.jpg"
    renamed = tmp_path / "renamed.jpg"
    shutil.copy(image, renamed)
    code, out, err = _cli(capsys, "lineage", "predictions", str(image), "--mlmd-sqlite", store_copy)
    assert code == 0, err
    assert f"PushedModel {pushed_id} (version {version})" in out
    assert "matched by path and bytes" in out
    code, out, _ = _cli(
        capsys, "lineage", "predictions", str(renamed), "--json", "--mlmd-sqlite", store_copy
    )
    scorings = json.loads(out)["scorings"]
    # cat/copy.jpg holds the same bytes as cat/0.jpg: both rows match the renamed copy.
    assert sorted(scoring["match"] for scoring in scorings) == [
        f"bytes only (scored as {image})",
        f"bytes only (scored as {cats / 'copy.jpg'})",
    ]
    assert {scoring["model"]["id"] for scoring in scorings} == {pushed_id}
    assert {scoring["predictions"]["uri"] for scoring in scorings} == {str(output)}

    # The record is no pipeline run: the runs and the model's lineage read as before.
    store = open_store(store_copy)
    assert len(lineage.list_runs(store)) == len(lineage.list_runs(two_runs.store))
    model = lineage.model_lineage(store, pushed_id).model
    assert model.type == "Model"

    # The Trainer's own export is recorded as its Model, a Pusher's base folder as its newest
    # version; predictions written again to the same file replace the earlier record, so no
    # answer is credited to the model of the old rows.
    dog = two_runs.images / "dog" / "1.jpg"
    trainer_export = os.path.join(model.uri, "Format-Serving")
    serving_base = os.path.dirname(destination)  # its newest version: the one pushed last
    for command in (["--model", trainer_export], ["--model", serving_base], []):
        code, _, err = _cli(
            capsys,
            "predict",
            str(dog),
            *command,
            "--output",
            str(output),
            "--mlmd-sqlite",
            store_copy,
        )
        assert code == 0 and "not recorded" not in err, err
    code, out, _ = _cli(
        capsys, "lineage", "predictions", str(dog), "--json", "--mlmd-sqlite", store_copy
    )
    [scoring] = json.loads(out)["scorings"]
    assert scoring["model"]["id"] == pushed_id
    code, out, _ = _cli(capsys, "lineage", "predictions", str(image), "--mlmd-sqlite", store_copy)
    assert "no recorded predictions include it" in out


def test_an_image_never_scored_says_so(two_runs, store_copy, capsys):
    code, out, _ = _cli(
        capsys,
        "lineage",
        "predictions",
        str(two_runs.images / "dog" / "1.jpg"),
        "--mlmd-sqlite",
        store_copy,
    )

    assert code == 0
    assert "no recorded predictions include it" in out
