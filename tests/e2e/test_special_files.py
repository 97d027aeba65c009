"""Runs over hostile input files finish with their real outcome: a named pipe in a class folder
(rejected by the ingest, never opened by the report's thumbnails) or named by a manifest row
(never opened by the ingest), and a class folder whose name holds terminal escape codes, which
the console and `imgpipe lineage` show as text."""

import os
import subprocess
import sys

import pytest

from pipeline import config_file, exit_codes
from tests.pipeline.tiny_pipeline import IMAGES_PER_CLASS, LABELS, tiny_config, write_images

pytestmark = pytest.mark.slow

IMGPIPE = os.path.join(os.path.dirname(sys.executable), "imgpipe")
RUN_TIMEOUT_S = 1800  # a hang fails the test instead of stalling the suite
ESCAPED_CLASS = "\x1b[31mowl"


def _imgpipe(*arguments) -> subprocess.CompletedProcess:
    return subprocess.run(
        [IMGPIPE, *arguments], capture_output=True, text=True, timeout=RUN_TIMEOUT_S
    )


def _run(root, data) -> subprocess.CompletedProcess:
    build = root / "build"
    path = root / "tiny.yaml"
    path.write_text(config_file.dump(tiny_config(data, build)))
    return _imgpipe("run", "--config", str(path), "--build-dir", str(build))


def test_a_pipe_in_a_class_folder_and_escape_codes_in_a_class_name(tmp_path):
    images = write_images(tmp_path / "images")
    os.rename(images / LABELS[-1], images / ESCAPED_CLASS)
    os.mkfifo(images / "cat" / "pipe.jpg")

    result = _run(tmp_path, images)

    assert result.returncode == exit_codes.OK, result.stderr
    assert "\x1b" not in result.stdout + result.stderr
    lineage = _imgpipe(
        "lineage", "model", "--latest-pushed", "--build-dir", str(tmp_path / "build")
    )
    assert lineage.returncode == exit_codes.OK, lineage.stderr
    assert "\x1b" not in lineage.stdout and "[31mowl" in lineage.stdout  # shown escaped
    report = _imgpipe(
        "report",
        "latest",
        "--output",
        str(tmp_path / "r.html"),
        "--build-dir",
        str(tmp_path / "build"),
    )
    assert report.returncode == exit_codes.OK, report.stderr
    assert "cat/pipe.jpg" in (tmp_path / "r.html").read_text()  # listed, never read


def test_a_manifest_row_naming_a_pipe_is_rejected_and_the_run_goes_on(tmp_path):
    images = write_images(tmp_path / "images")
    os.mkfifo(images / "cat" / "pipe.jpg")
    rows = [f"{label}/{i}.jpg,{label}" for label in LABELS for i in range(IMAGES_PER_CLASS)]
    manifest = images / "list.csv"
    manifest.write_text("\n".join(["path,label", *rows, "cat/pipe.jpg,cat"]) + "\n")

    result = _run(tmp_path, manifest)

    assert result.returncode == exit_codes.OK, result.stderr
    assert "1 rejected" in result.stdout, result.stdout
