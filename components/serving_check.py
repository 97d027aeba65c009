"""ServingCheck: blesses a model only when it serves correctly from a fresh process.

Its output is a standard InfraBlessing (custom property `blessed`, as TFX's InfraValidator
writes), so the standard Pusher enforces it beside the Evaluator's blessing: a model that loads
and scores well in the training process but fails to load, answer or sum to 1 elsewhere is never
pushed. The check itself runs in serving_probe.py in a child process; a crash there refuses the
model with the child's last output as the reason.
"""

import json
import os
import subprocess
import sys
import tempfile

from apache_beam.io.filesystems import FileSystems
from tfx.dsl.component.experimental.annotations import InputArtifact, OutputArtifact, Parameter
from tfx.dsl.component.experimental.decorators import component
from tfx.types import standard_artifacts
from tfx.utils import path_utils

import components
from components import serving_probe  # by import: its code is this component's code

REPORT_FILE = "serving_check.json"
BLESSED_FILE, NOT_BLESSED_FILE = "INFRA_BLESSED", "INFRA_NOT_BLESSED"  # InfraValidator's names
_PROJECT_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(components.__file__)))
PROBE_TIMEOUT_SECONDS = 600


def run_probe(model_dir: str, latency_requests: int) -> dict:
    """Runs serving_probe in a fresh Python process; its report, or one naming its failure."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [_PROJECT_ROOT, env.get("PYTHONPATH")]))
    with tempfile.TemporaryDirectory() as scratch:
        report_path = os.path.join(scratch, REPORT_FILE)
        command = [
            sys.executable,
            "-m",
            serving_probe.__name__,
            model_dir,
            report_path,
            str(latency_requests),
        ]
        try:
            finished = subprocess.run(
                command, env=env, capture_output=True, text=True, timeout=PROBE_TIMEOUT_SECONDS
            )
        except subprocess.TimeoutExpired:
            return _failed(model_dir, f"probe still running after {PROBE_TIMEOUT_SECONDS} s")
        if finished.returncode != 0 or not os.path.exists(report_path):
            tail = (finished.stderr or finished.stdout).strip().splitlines()[-5:]
            return _failed(
                model_dir, f"probe exited with {finished.returncode}: " + " | ".join(tail)
            )
        with open(report_path) as handle:
            return json.load(handle)


def _failed(model_dir: str, problem: str) -> dict:
    return {"model_dir": model_dir, "problems": [problem]}


@component
def ServingCheck(  # noqa: N802  TFX component names are classes
    model: InputArtifact[standard_artifacts.Model],
    blessing: OutputArtifact[standard_artifacts.InfraBlessing],
    latency_requests: Parameter[int] = 200,
) -> None:
    """Loads the exported model in a fresh process, replays its warmup requests, checks the
    answers, measures load time and p50/p99 single-image latency; blesses or refuses.

    Args:
      latency_requests: one-image requests timed for the latency percentiles.
    """
    report = run_probe(path_utils.serving_model_path(model.uri), latency_requests)
    blessed = not report["problems"]
    report["blessed"] = blessed
    with FileSystems.create(FileSystems.join(blessing.uri, REPORT_FILE)) as handle:
        handle.write(json.dumps(report, indent=2).encode())
    marker = BLESSED_FILE if blessed else NOT_BLESSED_FILE
    FileSystems.create(FileSystems.join(blessing.uri, marker)).close()
    blessing.set_int_custom_property("blessed", int(blessed))
    blessing.set_int_custom_property("has_model", 0)  # the Pusher pushes the Trainer's model
    if "load_seconds" in report:
        blessing.set_float_custom_property("load_seconds", report["load_seconds"])
    for name, value in report.get("latency_ms", {}).items():
        if name != "requests":
            blessing.set_float_custom_property(f"latency_{name}_ms", value)
    if not blessed:
        blessing.set_string_custom_property("problems", "; ".join(report["problems"]))
