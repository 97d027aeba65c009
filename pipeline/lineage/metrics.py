"""The evaluation metrics a run summary shows, read from a ModelEvaluation artifact with TFMA's
own reader (TFMA loads when first asked): the gate's accuracy and failed thresholds. Per-class
metrics are the readable evaluation's (components/evaluation_report.py), not TFMA's."""

from __future__ import annotations

import functools
import json
import logging

HEADLINE_METRIC = "sparse_categorical_accuracy"


def _overall(evaluation_uri: str, model: str):
    """(metric key, value) of every metric on the overall slice, of the candidate ("") or the
    baseline ("baseline") model, diffs left out."""
    import tensorflow_model_analysis as tfma

    for metrics in tfma.load_metrics(evaluation_uri):
        if metrics.slice_key.single_slice_keys:
            continue
        for entry in metrics.metric_keys_and_values:
            is_baseline = entry.key.model_name == "baseline"
            if not entry.key.is_diff and is_baseline == (model == "baseline"):
                yield entry.key, entry.value


@functools.lru_cache(maxsize=64)
def eval_accuracy(evaluation_uri: str) -> float | None:
    """The candidate model's accuracy on the overall slice of a ModelEvaluation artifact (not
    the baseline's, not a per-slice value, not a diff), read with TFMA's own reader."""
    tf_logger = logging.getLogger("tensorflow")
    level = tf_logger.level
    tf_logger.setLevel(logging.ERROR)  # TFMA's reader trips a TensorFlow deprecation notice
    try:
        for key, value in _overall(evaluation_uri, model=""):
            if key.name == HEADLINE_METRIC and value.HasField("double_value"):
                return value.double_value.value
    finally:
        tf_logger.setLevel(level)
    return None


@functools.lru_cache(maxsize=64)
def validation_failures(evaluation_uri: str) -> str | None:
    """The TFMA thresholds a model failed: metric, its value, the threshold and, for a change
    threshold, the baseline's value; None when TFMA wrote no failures."""
    import tensorflow_model_analysis as tfma
    from google.protobuf import json_format

    result = tfma.load_validation_result(evaluation_uri)
    baseline = _baseline_metrics(evaluation_uri)
    lines = []
    for per_slice in result.metric_validations_per_slice:
        for failure in per_slice.failures:
            name = failure.metric_key.name
            threshold = json_format.MessageToDict(failure.metric_threshold)
            line = (
                f"{'change in ' if failure.metric_key.is_diff else ''}{name} "
                f"{_metric_value(failure.metric_value)} fails threshold {json.dumps(threshold)}"
            )
            if failure.metric_key.is_diff and name in baseline:
                line += f" (baseline {baseline[name]:.4f})"
            lines.append(line)
    return "; ".join(lines) or None


def _metric_value(value) -> str:
    kind = value.WhichOneof("type")
    return f"{value.double_value.value:.4f}" if kind == "double_value" else str(value)


def _baseline_metrics(evaluation_uri: str) -> dict[str, float]:
    return {
        key.name: value.double_value.value
        for key, value in _overall(evaluation_uri, model="baseline")
        if value.HasField("double_value") and not key.sub_key.ByteSize()
    }
