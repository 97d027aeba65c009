"""A run over hostile input finishes with its real outcome: a manifest row naming a named pipe
(rejected by the ingest without being opened, and never opened by the run report's
thumbnails of rejected files), and a class name holding terminal escape codes, which the
console and `imgpipe lineage` show as text. (A pipe in a class folder takes the same two paths:
the folder walk lists it as unreadable without opening it, tests/data_prep/reading/test_sources.py,
and the thumbnails never open it, tests/pipeline/ui/test_view_parts.py.)"""

import os
import subprocess
import sys

import pytest

from pipeline import exit_codes
from pipeline.config import config_file
from tests.pipeline.tiny_pipeline import IMAGES_PER_CLASS, LABELS, tiny_config, write_images

pytestmark = pytest.mark.slow

IMGPIPE = os.path.join(os.path.dirname(sys.executable), "imgpipe")
RUN_TIMEOUT_S = 1800  # a hang fails the test instead of stalling the suite
ESCAPED = "\x1b[31m"  # turns a terminal's text red


def _imgpipe(*arguments) -> subprocess.CompletedProcess:
    return subprocess.run(
        [IMGPIPE, *arguments], capture_output=True, text=True, timeout=RUN_TIMEOUT_S
    )


def test_a_pipe_in_a_manifest_and_escape_codes_in_a_class_name(tmp_path):
    images = write_images(tmp_path / "images")
    os.mkfifo(images / "cat" / "pipe.jpg")
    rows = [
        f"{label}/{i}.jpg,{ESCAPED + label if label == LABELS[-1] else label}"
        for label in LABELS
        for i in range(IMAGES_PER_CLASS)
    ]
    manifest = images / "list.csv"
    manifest.write_text("\n".join(["path,label", *rows, "cat/pipe.jpg,cat"]) + "\n")
    build = tmp_path / "build"
    config = tmp_path / "tiny.yaml"
    config.write_text(config_file.dump(tiny_config(manifest, build)))

    result = _imgpipe("run", "--config", str(config), "--build-dir", str(build))

    assert result.returncode == exit_codes.OK, result.stderr
    assert "1 rejected" in result.stdout, result.stdout
    assert "\x1b" not in result.stdout + result.stderr
    lineage = _imgpipe("lineage", "model", "--latest-pushed", "--build-dir", str(build))
    assert lineage.returncode == exit_codes.OK, lineage.stderr
    assert "\x1b" not in lineage.stdout and "[31mowl" in lineage.stdout  # shown escaped
    report = tmp_path / "report.html"
    shown = _imgpipe("report", "latest", "--output", str(report), "--build-dir", str(build))
    assert shown.returncode == exit_codes.OK, shown.stderr
    assert "cat/pipe.jpg" in report.read_text()  # listed as rejected, never read
