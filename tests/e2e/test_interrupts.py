"""Ctrl-C or SIGTERM at any point of `imgpipe run` stops it: exit status 130, the run recorded
as interrupted, nothing pushed. The runs share one store, so each one's earlier components come
from the cache and it works only up to the point it is stopped at. Each is started with SIGINT
ignored, as a shell without job control starts a background job (`make test &`): a `kill -INT`
must stop it all the same."""

import json
import os
import re
import signal
import subprocess
import time

import pytest

from pipeline import exit_codes
from tests.e2e.test_run_console import IMGPIPE, _config_file
from tests.pipeline.tiny_pipeline import write_images

pytestmark = pytest.mark.slow

# (what the console prints when the signal is due, seconds to wait after it, the signal, the
# runner): every component's start, in the order a run reaches them, the signals taking turns.
# A component's own line is its start (a moment later is inside it); the progress lines are the
# middle of the ingest and of training; a moment after the Pusher starts is the middle of the
# push. The local cluster's Beam options change the Beam components' cache keys: its run comes
# last.
POINTS = [
    (r"ImageExampleGen +started", 0, signal.SIGINT, "local"),
    (r"ImageExampleGen: \d+ of \d+ files inspected", 0, signal.SIGTERM, "local"),
    (r"StatisticsGen +started", 1, signal.SIGINT, "local"),
    (r"CuratedSchemaGen +started", 0, signal.SIGTERM, "local"),
    (r"drift_baseline_resolver +started", 0, signal.SIGINT, "local"),
    (r"DistributionValidator +started", 0, signal.SIGTERM, "local"),
    (r"ExampleValidator +started", 0, signal.SIGINT, "local"),
    (r"DataGate +started", 0, signal.SIGTERM, "local"),
    (r"Transform +started", 0, signal.SIGTERM, "local"),
    (r"Trainer: epoch \d+ of \d+, step", 0, signal.SIGINT, "local"),
    (r"EvaluationReportGen +started", 0, signal.SIGTERM, "local"),
    (r"ServingCheck +started", 0, signal.SIGINT, "local"),
    (r"baseline_model_resolver +started", 0, signal.SIGTERM, "local"),
    (r"DataHealthGen +started", 0, signal.SIGINT, "local"),
    (r"Evaluator +started", 1, signal.SIGTERM, "local"),
    (r"TFLiteExport +started", 0, signal.SIGINT, "local"),
    (r"ModelCardGen +started", 0, signal.SIGTERM, "local"),
    (r"Pusher +started", 0, signal.SIGTERM, "local"),
    (r"Pusher +started", 0.5, signal.SIGINT, "local"),
    (r"ImageExampleGen +started", 1, signal.SIGINT, "local-cluster"),
]


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    root = tmp_path_factory.mktemp("interrupts")
    build = root / "build"
    return _config_file(root, write_images(root / "images"), build), build


def _listed_runs(build) -> list[dict]:
    """`imgpipe runs` of the store: a run that recorded no execution is not listed."""
    listed = subprocess.run(
        [IMGPIPE, "runs", "--json", "--build-dir", str(build)], capture_output=True, text=True
    )
    if listed.returncode and "no runs in this metadata store" in listed.stderr:
        return []
    assert listed.returncode == exit_codes.OK, listed.stderr
    return json.loads(listed.stdout)


def _ignoring_sigint():
    signal.signal(signal.SIGINT, signal.SIG_IGN)


@pytest.mark.parametrize(
    ("line", "wait", "how", "runner"),
    POINTS,
    ids=[f"{p[3]}-{p[0].split()[0]}-{p[1]}s-{p[2].name}" for p in POINTS],
)
def test_a_signal_at_any_point_stops_the_run_and_pushes_nothing(store, line, wait, how, runner):
    path, build = store
    process = subprocess.Popen(
        [IMGPIPE, "run", "--config", str(path), "--build-dir", str(build), "--runner", runner],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=_ignoring_sigint,
    )
    shown = []
    for printed in process.stdout:
        shown.append(printed)
        if re.search(line, printed):
            time.sleep(wait)
            process.send_signal(how)
            break
    out, err = process.communicate(timeout=600)
    assert re.search(line, "".join(shown)), "".join(shown) + out + err
    assert process.returncode == exit_codes.INTERRUPTED, "".join(shown) + out + err
    assert "imgpipe run: error: interrupted in " in err
    runs = _listed_runs(build)  # none when the first run stopped before its first execution
    assert all(run["status"] == "interrupted" and run["pushed_to"] is None for run in runs)
    assert "running" not in {c["state"] for run in runs for c in run["components"]}
    serving = build / "serving" / "imgpipe"  # the serving lock and staging may be left, no version
    assert not serving.exists() or not [name for name in os.listdir(serving) if name.isdigit()]
