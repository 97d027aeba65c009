"""`imgpipe serve` says in one line, before loading TensorFlow, what keeps it from serving."""

from pipeline.cli import main


def test_a_folder_without_a_pushed_model_is_one_error_line(tmp_path, capsys):
    (tmp_path / "123").mkdir()  # a numbered folder without a SavedModel is no version
    assert main(["serve", "--model", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"imgpipe serve: error: {tmp_path} holds no pushed model")
    assert len(err.strip().splitlines()) == 1


def test_the_settings_default_folder_and_bad_flags_are_named(tmp_path, capsys):
    assert main(["serve", "--build-dir", str(tmp_path)]) == 2
    assert f"{tmp_path}/serving/imgpipe holds no pushed model" in capsys.readouterr().err
    assert main(["serve", "--model", str(tmp_path), "--max-request-bytes", "0"]) == 2
    assert "--max-request-bytes must be at least 1" in capsys.readouterr().err
    assert main(["serve", "--model", str(tmp_path), "--max-batch", "0"]) == 2
    assert "--max-batch must be at least 1, got 0" in capsys.readouterr().err
    assert main(["serve", "--model", str(tmp_path), "--batch-wait-ms", "-1"]) == 2
    assert "--batch-wait-ms must be 0 or more" in capsys.readouterr().err
    version = tmp_path / "5"  # looks whole: the port is refused before the model is loaded
    (version / "variables").mkdir(parents=True)
    (version / "saved_model.pb").write_bytes(b"")
    (version / "variables" / "variables.index").write_bytes(b"")
    assert main(["serve", "--model", str(tmp_path), "--port", "70000"]) == 2
    assert "--port 70000 is not a port" in capsys.readouterr().err
