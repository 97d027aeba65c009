"""ServingCheck: blesses a model only when it serves correctly from stock TensorFlow.

Its output is a standard InfraBlessing (custom property `blessed`, as TFX's InfraValidator
writes), so the standard Pusher enforces it beside the Evaluator's blessing: a model that loads
and scores well in the training process but would fail to load, answer or sum to 1 elsewhere is
never pushed. The check loads the model in a fresh Python process (serving_verification.py), as
a model server would; its report records that process's pid.
"""

import json

from apache_beam.io.filesystems import FileSystems
from tfx.dsl.component.experimental.annotations import InputArtifact, OutputArtifact, Parameter
from tfx.dsl.component.experimental.decorators import component
from tfx.types import standard_artifacts
from tfx.utils import path_utils

from components.serving.serving_verification import verify_serving

REPORT_FILE = "serving_check.json"
BLESSED_FILE, NOT_BLESSED_FILE = "INFRA_BLESSED", "INFRA_NOT_BLESSED"  # InfraValidator's names


@component
def ServingCheck(  # noqa: N802  TFX component names are classes
    model: InputArtifact[standard_artifacts.Model],
    blessing: OutputArtifact[standard_artifacts.InfraBlessing],
    latency_requests: Parameter[int] = 200,
    timeout_s: Parameter[int] = 600,
) -> None:
    """In a fresh process: checks the exported model's graph for anything stock TensorFlow
    lacks, loads it, replays its warmup requests, checks the answers, measures load time and
    p50/p99 single-image latency; blesses or refuses.

    Args:
      latency_requests: one-image requests timed for the latency percentiles.
      timeout_s: a serving process that has not answered by then is killed, the model refused.
    """
    report = verify_serving(path_utils.serving_model_path(model.uri), latency_requests, timeout_s)
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
