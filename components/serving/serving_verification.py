"""The serving check in a fresh Python process, as TFX's InfraValidator checks a model in a fresh
TF Serving: custom objects registered only in the trainer's process, Python state the model
leans on, a missing asset, all pass in the process that trained the model and fail here.

`verify_serving` starts `python -m components.serving.serving_verification`, which imports
TensorFlow and the probe only (components/serving/serving_probe.py: load with tf.saved_model.load,
replay the
warmup requests, check every answer, time single-image requests) and writes its report, with
the pid of the process that loaded the model. A process that does not answer within the
timeout is killed and the model refused.
"""

from __future__ import annotations

import json
import os
import pathlib
import subprocess
import sys
import tempfile

# The folder that holds this `components` package: the fresh process runs there, since
# `python -m` looks first in its working folder, which may hold another checkout's.
_PROJECT_ROOT = str(pathlib.Path(__file__).resolve().parents[2])
_STDERR_TAIL_CHARS = 500


def verify_serving(model_dir: str, latency_requests: int, timeout_s: float) -> dict:
    """The serving report of the SavedModel in model_dir, made in a fresh process; its problems
    are empty only when the model loads there and every warmup request gets a right answer."""
    with tempfile.TemporaryDirectory() as scratch:
        report_path = os.path.join(scratch, "report.json")
        if "://" not in model_dir:
            model_dir = os.path.abspath(model_dir)
        command = [sys.executable, "-m", __name__, model_dir, str(latency_requests), report_path]
        paths = [_PROJECT_ROOT, *filter(None, [os.environ.get("PYTHONPATH")])]
        environment = {**os.environ, "PYTHONPATH": os.pathsep.join(paths)}
        try:
            finished = subprocess.run(
                command,
                cwd=_PROJECT_ROOT,
                env=environment,
                capture_output=True,
                text=True,
                timeout=timeout_s,
            )
        except subprocess.TimeoutExpired:  # subprocess.run has killed it
            return _refused(model_dir, f"the serving process did not answer within {timeout_s:g} s")
        if finished.returncode != 0 or not os.path.exists(report_path):
            said = finished.stderr.strip()[-_STDERR_TAIL_CHARS:]
            return _refused(
                model_dir,
                f"the serving process failed (exit status {finished.returncode}): {said}",
            )
        with open(report_path) as handle:
            report = json.load(handle)
    report["checked_by_pid"] = os.getpid()
    return report


def _refused(model_dir: str, problem: str) -> dict:
    return {"model_dir": model_dir, "problems": [problem], "checked_by_pid": os.getpid()}


def main(argv: list[str]) -> None:
    """In the fresh process: probe the model, write the report (with this process's pid)."""
    model_dir, latency_requests, report_path = argv
    from components.serving.serving_probe import probe

    report = probe(model_dir, int(latency_requests))
    report["loaded_in_pid"] = os.getpid()
    with open(report_path, "w") as handle:
        json.dump(report, handle)


if __name__ == "__main__":
    main(sys.argv[1:])
