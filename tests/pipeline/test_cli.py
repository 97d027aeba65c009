import argparse
import importlib.metadata
import os
import subprocess
import sys

import pytest

from data_prep import default_dataset
from pipeline import exit_codes
from pipeline.cli import main, options
from pipeline.cli.prep import parse_size
from tests.data_prep import image_files

IN_PROCESS = ["--", "--direct_running_mode=in_memory", "--direct_num_workers=1"]


@pytest.mark.parametrize(
    ("text", "size"),
    [
        ("100MB", 100 * 2**20),
        ("512k", 512 * 2**10),
        ("2g", 2 * 2**30),
        ("1048576", 2**20),
        ("1.5MiB", int(1.5 * 2**20)),
    ],
)
def test_parse_size(text, size):
    assert parse_size(text) == size


def test_parse_size_rejects_nonsense():
    with pytest.raises(argparse.ArgumentTypeError, match="not a size"):
        parse_size("lots")


def test_console_script_is_installed_with_help_for_each_subcommand():
    """Help is the console too: no library's warnings on stderr (the help path imports no Beam
    and no TensorFlow)."""
    script = os.path.join(os.path.dirname(sys.executable), "imgpipe")
    helps = {}
    for command in ("", "prep", "default-data", "audit"):
        result = subprocess.run(
            [script, *command.split(), "--help"], capture_output=True, text=True, check=True
        )
        assert "usage: imgpipe" in result.stdout
        assert result.stderr == ""
        helps[command] = result.stdout
    assert "manifest" in helps["prep"]
    assert "--folds K" in helps["audit"]


_ENTRY_POINT = """
import atexit, sys
from pipeline.cli import run_and_exit
atexit.register(lambda: print("atexit handler ran"))
sys.argv = ["imgpipe", *sys.argv[1:]]
run_and_exit()
"""


@pytest.mark.parametrize(
    ("setting", "code"),
    [("min_accuracy=0.5", exit_codes.OK), ("min_accuracy=7", exit_codes.BAD_INPUT)],
)
def test_console_entry_point_exits_with_the_command_status_after_flushing_and_atexit(setting, code):
    """The command's status is the exit status, everything printed arrives, and atexit handlers
    run."""
    result = subprocess.run(
        [sys.executable, "-c", _ENTRY_POINT, "config", "show", "--set", setting],
        capture_output=True,
        text=True,
    )
    assert result.returncode == code, result.stderr
    assert result.stdout.endswith("atexit handler ran\n")
    if code == exit_codes.OK:
        assert "min_accuracy: 0.5" in result.stdout
    else:
        assert result.stderr.startswith("imgpipe config: error: ")


def test_bad_setting_fails_before_any_work_naming_the_field(tmp_path, capsys):
    code = main(
        [
            "prep",
            "--data",
            str(tmp_path),
            "--output",
            str(tmp_path / "out"),
            "--eval-fraction",
            "1.5",
        ]
    )
    assert code == 2
    err = capsys.readouterr().err
    assert "ingest.eval_fraction: 1.5 is not between 0 and 1" in err
    assert "--eval-fraction is now --set ingest.eval_fraction=1.5" in err  # the alias's notice
    assert not (tmp_path / "out").exists()


def test_prep_takes_its_settings_from_the_config_file_and_set_like_run(tmp_path, capsys):
    settings = tmp_path / "imgpipe.yaml"
    settings.write_text("ingest:\n  test_fraction: 0.9\n")
    argv = ["prep", "--data", str(tmp_path), "--output", str(tmp_path / "out")]
    assert main([*argv, "--config", str(settings)]) == exit_codes.BAD_INPUT
    assert "leaves nothing to train on" in capsys.readouterr().err
    assert main([*argv, "--set", "ingest.limits.max_side=8"]) == exit_codes.BAD_INPUT
    assert "ingest.limits.max_side: 8 is below 16 pixels" in capsys.readouterr().err
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize(
    ("setting", "message"),
    [
        ("trainer.epochs=0", "trainer.epochs: 0 is below 1"),
        ("trainer.precision=float8", "trainer.precision:"),
        ("trainer.epochs=many", "trainer.epochs: 'many' is not of type int"),
        ("trainer.image_size=100000", "trainer.image_size: 100000: one batch of 64 images takes"),
        ("ingest.eval_fraction=0", "ingest.eval_fraction: 0.0 leaves no eval split"),
        ("trainer.seed=18446744073709551616", "trainer.seed: 18446744073709551616 is not in 0.."),
        ("tuning.seed=-1", "tuning.seed: -1 is not in 0..4294967295"),
    ],
)
def test_run_overrides_are_checked_before_any_work(tmp_path, capsys, setting, message):
    images = tmp_path / "images"
    images.mkdir()
    build = tmp_path / "build"
    assert main(["run", "--data", str(images), "--build-dir", str(build), "--set", setting]) == 2
    assert message in capsys.readouterr().err
    assert not build.exists()


@pytest.mark.parametrize("where", ["data", "build", "link"])
def test_a_serving_folder_overlapping_the_data_or_the_build_is_refused(tmp_path, capsys, where):
    images = tmp_path / "ds" / "digits"
    for label in ("0", "1", "2"):
        (images / label).mkdir(parents=True)
        (images / label / "a.png").write_bytes(b"an image")
    build = tmp_path / "build"
    serving = {"data": tmp_path / "ds", "build": build / "tfx", "link": tmp_path / "s"}[where]
    if where == "link":
        os.symlink(tmp_path / "ds", serving)
    code = main(
        ["run", "--data", str(images), "--build-dir", str(build)]
        + ["--set", f"serving_dir={serving}", "--set", "name=digits"]
    )
    assert code == 2
    [line] = capsys.readouterr().err.strip().splitlines()
    field, overlapped = (
        ("pipeline_root", build / "tfx") if where == "build" else ("ingest.input", images)
    )
    assert f"overlaps {field} {overlapped}" in line
    assert line.startswith("imgpipe run: error: serving_dir: the serving folder ")
    assert sorted(os.listdir(images)) == ["0", "1", "2"] and not build.exists()


def _config_args(*argv):
    parser = argparse.ArgumentParser(parents=[options.config_options()])
    return parser.parse_args(list(argv))


@pytest.mark.slow
def test_run_draws_the_embedded_data_beside_its_imports_only_when_nothing_names_data(tmp_path):
    named = _config_args("--build-dir", str(tmp_path), "--data", str(tmp_path / "mine"))
    loaded = options.effective_config(named, [], generate_data=False)
    with options.embedded_data_drawn(named, loaded):
        pass
    assert not os.path.exists(tmp_path / "default_data")

    unnamed = _config_args("--build-dir", str(tmp_path))
    loaded = options.effective_config(unnamed, [], generate_data=False)
    config = loaded.config
    assert not os.path.exists(config.ingest.input)
    with options.embedded_data_drawn(unnamed, loaded):
        pass
    assert config.ingest.input == str(tmp_path / "default_data")
    assert os.path.exists(os.path.join(config.ingest.input, default_dataset.INFO_FILE))


def test_missing_input_is_a_clear_error(tmp_path, capsys):
    assert main(["prep", "--data", str(tmp_path / "nope"), "--output", str(tmp_path)]) == 2
    assert "does not exist" in capsys.readouterr().err


@pytest.mark.slow
def test_prep_writes_dataset_and_summarizes(tmp_path, capsys):
    for label in ("a", "b"):
        for i in range(8):
            path = tmp_path / "in" / label / f"{i}.jpg"
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(image_files.jpeg(seed=i + (100 if label == "b" else 0)))
    (tmp_path / "in" / "a" / "broken.png").write_bytes(b"nope")
    (tmp_path / "in" / "docs").mkdir()
    (tmp_path / "in" / "docs" / "README.txt").write_bytes(b"where the photos came from")
    code = main(
        [
            "prep",
            "--data",
            str(tmp_path / "in"),
            "--output",
            str(tmp_path / "out"),
            "--max-reject-fraction",
            "0.2",
            *IN_PROCESS,
        ]
    )
    out = capsys.readouterr().out
    assert code == 0
    assert "18 files: 16 accepted, 1 rejected, 1 ignored" in out
    assert "rejected 1: not_an_image 1" in out
    assert "class 'docs' has no usable image and was left out" in out
    assert (tmp_path / "out" / "label_map.json").exists()


@pytest.mark.slow
def test_default_data_then_prep_is_what_make_run_local_does(tmp_path, capsys):
    assert (
        main(["default-data", "--output", str(tmp_path / "data"), "--images-per-class", "5"]) == 0
    )
    assert (
        main(
            [
                "prep",
                "--data",
                str(tmp_path / "data"),
                "--output",
                str(tmp_path / "out"),
                *IN_PROCESS,
            ]
        )
        == 0
    )
    assert "0 rejected" in capsys.readouterr().out


def test_a_reader_that_stops_reading_ends_the_command_quietly():
    """`imgpipe config show | head -0`: the pipe is closed before the first line is written."""
    process = subprocess.Popen(
        [sys.executable, "-c", _ENTRY_POINT, "config", "show"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    process.stdout.close()  # long before the interpreter has started and imported the CLI
    stderr = process.stderr.read()
    assert process.wait() == exit_codes.OK
    assert stderr == ""


@pytest.mark.parametrize("command", [["runs"], ["run"], ["prep", "--data", "x", "--output", "y"]])
def test_a_build_dir_that_is_a_file_is_one_error_line(tmp_path, capsys, command):
    (tmp_path / "build").write_text("a file")
    assert main([*command, "--build-dir", str(tmp_path / "build")]) == exit_codes.BAD_INPUT
    err = capsys.readouterr().err
    assert err == (
        f"imgpipe {command[0]}: error: --build-dir {tmp_path / 'build'} is a file, not a folder\n"
    )


def test_version_names_the_installed_package(capsys):
    with pytest.raises(SystemExit) as raised:
        main(["--version"])
    assert raised.value.code == 0
    assert capsys.readouterr().out.strip() == f"imgpipe {importlib.metadata.version('imgpipe')}"


@pytest.mark.slow
def test_too_little_data_is_a_settings_error_before_any_component(tmp_path, capsys):
    images = tmp_path / "images"
    for i in range(18):
        path = images / ("cat" if i % 2 else "dog") / f"{i}.jpg"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(image_files.jpeg(seed=i))
    build = tmp_path / "build"
    code = main(["run", "--data", str(images), "--build-dir", str(build)])
    err = capsys.readouterr().err
    assert code == exit_codes.BAD_INPUT
    assert (
        f"imgpipe run: error: trainer.batch_size: 18 labelled images in {images} give about 14 "
        "training examples (80%), fewer than one batch of 64; use a smaller batch "
        "(--set trainer.batch_size=8) or add images"
    ) in err
    assert not (build / "tfx" / "ImageExampleGen").exists()


def test_predict_refuses_an_output_that_is_an_input_or_a_folder_before_any_work(tmp_path, capsys):
    photos = tmp_path / "photos"
    photos.mkdir()
    (photos / "a.png").write_bytes(b"an image")
    manifest = tmp_path / "list.csv"
    manifest.write_text("path\nphotos/a.png\n")
    model = str(tmp_path / "no-model")
    (tmp_path / "out.csv").mkdir()
    cases = [
        ([str(manifest)], str(manifest), "would overwrite or add to the input"),
        ([str(photos)], str(photos / "p.csv"), "would overwrite or add to the input"),
        ([str(manifest)], str(tmp_path / "out.csv"), "is a folder; name a file in it"),
    ]
    for inputs, output, message in cases:
        code = main(["predict", "--model", model, "--output", output, *inputs])
        [line] = capsys.readouterr().err.strip().splitlines()
        assert code == 2 and line.startswith("imgpipe predict: error: --output ")
        assert message in line
    assert manifest.read_text() == "path\nphotos/a.png\n"
    assert os.listdir(photos) == ["a.png"]
