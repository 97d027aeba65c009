"""`imgpipe run` as a user (or a scheduler) sees it, without a terminal: a short console with
the components, progress and the run's own summary; one error line and its exit code per kind of
failure; a killed or interrupted run never shown as running; one run at a time per store."""

import json
import os
import re
import signal
import subprocess
import sys

import markupsafe
import pytest

from pipeline import exit_codes, run_guard
from pipeline.config import config_file
from tests.pipeline.expected import COMPONENTS
from tests.pipeline.tiny_pipeline import tiny_config, write_images

pytestmark = pytest.mark.slow

IMGPIPE = os.path.join(os.path.dirname(sys.executable), "imgpipe")
CHATTER = re.compile(
    r"traceback|error|warning|setuptools|pip |looking in indexes|successfully installed|"
    r"adding '|writing manifest|^[IWEF]\d{4} |external/",
    re.IGNORECASE | re.MULTILINE,
)


def _config_file(folder, images, build):
    """The tiny pipeline as a config file (what `imgpipe config show` prints)."""
    path = folder / "tiny.yaml"
    path.write_text(config_file.dump(tiny_config(images, build)))
    return path


def _start(*arguments):
    return subprocess.Popen(
        [IMGPIPE, *arguments], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )


def _read_until(process, text: str) -> list[str]:
    """stdout lines up to the first containing `text` (all of them if it never comes)."""
    lines = []
    for line in process.stdout:
        lines.append(line)
        if text in line:
            break
    return lines


def _runs(build) -> list[dict]:
    result = subprocess.run(
        [IMGPIPE, "runs", "--json", "--build-dir", str(build)],
        capture_output=True,
        text=True,
        check=True,
    )
    return json.loads(result.stdout)


@pytest.fixture(scope="module")
def console_runs(tmp_path_factory):
    """Two runs started together on one store: the second waits, then answers from the cache.
    Beam runs in each process (the tiny config)."""
    root = tmp_path_factory.mktemp("console")
    build = root / "build"
    path = _config_file(root, write_images(root / "images"), build)
    first = _start("run", "--config", str(path), "--build-dir", str(build))
    head = _read_until(first, "ImageExampleGen")
    second = _start("run", "--config", str(path), "--build-dir", str(build))
    out, err = first.communicate(timeout=1200)
    first_result = (first.returncode, "".join(head) + out, err)
    out, err = second.communicate(timeout=1200)
    return build, first_result, (second.returncode, out, err)


def test_a_tiny_run_prints_a_short_calm_console(console_runs):
    _, (code, out, err), _ = console_runs
    assert code == exit_codes.OK, err
    # Progress lines come every few seconds, so their number follows the machine's speed.
    progress = re.compile(r"^  \w+: (\d+ of \d+ files inspected|epoch \d+ of \d+, step)")
    lines = [line for line in out.splitlines() if not progress.search(line)]
    assert len(lines) <= 60, out
    assert not CHATTER.search(out + err), out + err
    assert err == ""
    assert re.search(r"^  ImageExampleGen: \d+ of 30 files inspected, .* images/s, ETA ", out, re.M)
    training = r"^  Trainer: epoch 1 of 1, step \d+ of \d+, .*loss .*accuracy .*ETA"
    assert re.search(training, out, re.M)
    for node in COMPONENTS:  # each component's start and end, the Trainer's too
        assert re.search(rf"^  {node} +started\n(.*\n)*  {node} +ran +\d+\.\d s$", out, re.M)
    # The full log holds what the console left out, child processes' output included.
    log = re.search(r"^full log: (.+)$", out, re.M).group(1)
    text = open(log).read()
    assert "Component Trainer is running." in text
    assert "progress training done=" in text


def test_two_runs_on_one_store_run_one_after_the_other_each_printing_its_own(console_runs):
    build, (first_code, first_out, _), (second_code, second_out, second_err) = console_runs
    assert (first_code, second_code) == (exit_codes.OK, exit_codes.OK), second_err
    assert "is already running in this store" in second_out and "waiting" in second_out
    printed = [
        re.search(r"^run (\S+) of pipeline imgpipe: complete$", out, re.M).group(1)
        for out in (first_out, second_out)
    ]
    runs = {run["run_id"]: run for run in _runs(build)}
    assert len(set(printed)) == 2 and set(printed) == set(runs)
    ingest = [
        {c["node"]: c["state"] for c in runs[run_id]["components"]}["ImageExampleGen"]
        for run_id in printed
    ]
    assert ingest == ["ran", "cached"]  # not two span-1 ingests


@pytest.fixture()
def tiny(tmp_path):
    build = tmp_path / "build"
    return _config_file(tmp_path, write_images(tmp_path / "images"), build), build


@pytest.mark.parametrize(
    ("how", "status", "code"),
    [(signal.SIGKILL, "failed", -signal.SIGKILL), (signal.SIGINT, "interrupted", 130)],
)
def test_a_killed_or_interrupted_run_is_never_shown_running(tiny, how, status, code):
    path, build = tiny
    process = _start("run", "--config", str(path), "--build-dir", str(build))
    assert "started" in _read_until(process, "StatisticsGen")[-1]
    process.send_signal(how)
    _, err = process.communicate(timeout=300)
    assert process.returncode == code
    if how == signal.SIGINT:
        assert re.fullmatch(
            r"imgpipe run: error: interrupted in StatisticsGen \(full log: .+\.log\)\n", err
        )
    [run] = _runs(build)
    assert run["status"] == status
    assert "running" not in {c["state"] for c in run["components"]}
    if how == signal.SIGKILL:  # the log stops mid-line: ML Metadata has the cause
        assert run["stopped_by"] in ("StatisticsGen", None)  # None: killed between components
        assert re.fullmatch(
            r"process \d+ on .+, started .+ ended without finishing", run["not_pushed_reason"]
        )


def _error_line(arguments, expected_code):
    result = subprocess.run([IMGPIPE, *arguments], capture_output=True, text=True)
    assert result.returncode == expected_code, result.stderr
    last = result.stderr.strip().splitlines()[-1]
    assert last.startswith("imgpipe run: error: ")
    return result, last


def test_a_missing_or_empty_input_is_one_error_line(tiny, tmp_path):
    path, build = tiny
    for data in (tmp_path / "missing", tmp_path / "empty"):
        if data.name == "empty":
            data.mkdir()
        common = ["--config", str(path), "--build-dir", str(build), "--data", str(data)]
        result, line = _error_line(["run", *common], exit_codes.BAD_INPUT)
        assert f"input {str(data)!r} is empty or does not exist" in line
        assert result.stderr.count("\n") == 1 and "Traceback" not in result.stdout


def test_a_single_class_folder_fails_in_the_ingest_and_verbose_works(tiny, tmp_path):
    path, build = tiny
    images = write_images(tmp_path / "one")
    for label in ("dog", "owl"):
        for image in (images / label).iterdir():
            image.unlink()
        (images / label).rmdir()
    # --verbose shows the logs live; TFX's Beam executors re-parse the command line with absl.
    result, line = _error_line(
        [
            "--verbose",
            "run",
            "--config",
            str(path),
            "--build-dir",
            str(build),
            "--data",
            str(images),
        ],
        exit_codes.BAD_INPUT,
    )
    assert line.startswith("imgpipe run: error: ImageExampleGen: ")
    assert "class" in line and "(full log: " in line
    assert "Component ImageExampleGen is running." in result.stderr  # live, with --verbose
    # `imgpipe runs` says why in the same words, not only where the log is.
    failed = _runs(build)[0]
    assert (failed["status"], failed["stopped_by"]) == ("failed", "ImageExampleGen")
    assert "class" in failed["not_pushed_reason"]
    assert "the run log has the cause" not in failed["not_pushed_reason"]
    page = tmp_path / "report.html"
    subprocess.run(
        [IMGPIPE, "report", "latest", "--build-dir", str(build), "--output", str(page)], check=True
    )
    assert str(markupsafe.escape(failed["not_pushed_reason"])) in page.read_text()


def test_a_second_run_with_no_wait_fails_at_once(tiny):
    path, build = tiny
    metadata = os.path.join(build, "tfx", "metadata.db")
    with run_guard.exclusive_run(metadata, "imgpipe", wait=False):
        _, line = _error_line(
            ["run", "--no-wait", "--config", str(path), "--build-dir", str(build)],
            exit_codes.BUSY,
        )
    assert f"pipeline 'imgpipe' is already running in this store (process {os.getpid()}" in line
