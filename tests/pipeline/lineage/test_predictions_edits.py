"""A recorded predictions file answers which model wrote it and which rows were edited since, in
CSV and JSON lines, from an in-memory store (the end-to-end query is in
tests/pipeline/test_predict_lineage.py)."""

import json

import pytest
from ml_metadata.metadata_store import metadata_store
from ml_metadata.proto import metadata_store_pb2 as mlmd_pb2

from pipeline.lineage import LineageError, predictions_edits
from pipeline.lineage.formatting import format_predictions_file_lineage
from pipeline.lineage.predictions_edits import predictions_file_lineage
from pipeline.predictions_file import PredictionRow, read_rows, write_rows
from pipeline.serving.predictions_record import record_predictions


def _store() -> tuple[metadata_store.MetadataStore, int]:
    """An in-memory store holding one Model artifact; its id."""
    config = mlmd_pb2.ConnectionConfig()
    config.fake_database.SetInParent()
    store = metadata_store.MetadataStore(config)
    model_type = store.put_artifact_type(mlmd_pb2.ArtifactType(name="Model"))
    [model_id] = store.put_artifacts([mlmd_pb2.Artifact(type_id=model_type, uri="/models/m")])
    return store, model_id


def _rows(folder) -> list[PredictionRow]:
    return [
        PredictionRow(
            str(folder / f"{name}.jpg"),
            "scored",
            top_k=((name, 0.8123456), ("other", 0.1876544)),
            model_version="3",
            sha256=f"{index:064x}",
        )
        for index, name in enumerate(["cat", "dog", "emu"])
    ] + [PredictionRow(str(folder / "notes.txt"), "ignored", detail="not an image file")]


def _recorded(tmp_path, suffix: str):
    """A predictions file written and recorded as `imgpipe predict --output` does."""
    store, model_id = _store()
    path = tmp_path / f"predictions{suffix}"
    write_rows(_rows(tmp_path), str(path))
    rows = read_rows(str(path))  # as the command records them: read back from the file
    record_predictions(store, model_id, str(path), rows, [str(tmp_path)], 0.5)
    return store, model_id, path


@pytest.mark.parametrize("suffix", [".csv", ".jsonl"])
def test_an_unchanged_file_names_the_model_that_wrote_it(tmp_path, suffix):
    store, model_id, path = _recorded(tmp_path, suffix)

    answer = predictions_file_lineage(store, str(path))

    assert answer.model.id == model_id and answer.unchanged is True
    assert (answer.edited, answer.added, answer.removed) == ((), (), 0)
    text = format_predictions_file_lineage(answer)
    assert f"with Model {model_id} (version 3)" in text
    assert "4 files, 3 scored, 0 low confidence, 0 rejected, 1 ignored" in text
    assert f"unchanged since written (sha256 {answer.sha256})" in text


def test_edited_added_and_removed_rows_are_told_apart(tmp_path):
    store, _, path = _recorded(tmp_path, ".csv")
    lines = path.read_text().splitlines(keepends=True)
    header, cat, dog, _emu, notes = lines
    edited_dog = dog.replace("0.812346", "0.990000", 1)  # its probability
    added = cat.replace("cat.jpg", "lynx.jpg")
    path.write_text("".join([header, cat, edited_dog, added, notes]))

    answer = predictions_file_lineage(store, str(path))

    assert answer.unchanged is False and answer.rows_compared
    assert answer.edited == (str(tmp_path / "dog.jpg"),)
    assert answer.added == (str(tmp_path / "lynx.jpg"),)
    assert answer.removed == 1  # emu's row
    text = format_predictions_file_lineage(answer)
    assert "changed since written" in text
    assert "rows: 1 edited, 1 added, 1 removed since written" in text
    assert f"  edited: {tmp_path / 'dog.jpg'}" in text


def test_a_file_rewritten_with_the_same_rows_has_every_row_as_written(tmp_path):
    store, _, path = _recorded(tmp_path, ".jsonl")
    rewritten = [
        json.dumps(json.loads(line), separators=(",", ":"))
        for line in path.read_text().split("\n")[:-1]
    ]
    path.write_text("\n".join(rewritten) + "\n")  # other spacing: other bytes, same rows

    answer = predictions_file_lineage(store, str(path))

    assert answer.unchanged is False
    assert (answer.edited, answer.added, answer.removed) == ((), (), 0)
    assert "every row as written" in format_predictions_file_lineage(answer)


def test_a_file_too_long_for_row_digests_still_compares_its_sha256(tmp_path, monkeypatch):
    monkeypatch.setattr(predictions_edits, "MAX_ROW_DIGESTS", 3)
    store, _, path = _recorded(tmp_path, ".csv")
    path.write_text(path.read_text().replace("0.812346", "0.9"))

    answer = predictions_file_lineage(store, str(path))

    assert answer.unchanged is False and not answer.rows_compared
    assert "the record holds no digests of them" in format_predictions_file_lineage(answer)


def test_an_image_is_no_predictions_file_and_an_unrecorded_table_is_refused(tmp_path):
    store, _, _ = _recorded(tmp_path, ".csv")
    stray = tmp_path / "mine.csv"
    stray.write_text("file,status\n")

    assert predictions_file_lineage(store, str(tmp_path / "cat.jpg")) is None
    with pytest.raises(LineageError, match="no predictions file recorded in this store"):
        predictions_file_lineage(store, str(stray))


def test_the_lineage_command_takes_a_predictions_file_or_an_image(tmp_path, capsys):
    from pipeline.cli import main

    database = str(tmp_path / "metadata.db")
    config = mlmd_pb2.ConnectionConfig()
    config.sqlite.filename_uri = database
    config.sqlite.connection_mode = mlmd_pb2.SqliteMetadataSourceConfig.READWRITE_OPENCREATE
    store = metadata_store.MetadataStore(config)
    model_type = store.put_artifact_type(mlmd_pb2.ArtifactType(name="Model"))
    [model_id] = store.put_artifacts([mlmd_pb2.Artifact(type_id=model_type, uri="/models/m")])
    path = tmp_path / "predictions.csv"
    write_rows(_rows(tmp_path), str(path))
    record_predictions(store, model_id, str(path), read_rows(str(path)), [str(tmp_path)], 0.5)
    query = ["lineage", "predictions", "--mlmd-sqlite", database]

    assert main([*query, str(path)]) == 0
    out = capsys.readouterr().out
    assert f"with Model {model_id} (version 3)" in out and "unchanged since written" in out
    assert main([*query, str(tmp_path / "cat.jpg")]) == 0
    assert "image " in capsys.readouterr().out
    (tmp_path / "mine.jsonl").write_text("")
    assert main([*query, str(tmp_path / "mine.jsonl")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("imgpipe lineage: error: ") and "no predictions file recorded" in err
