"""The evaluation metrics a run summary shows, read from a ModelEvaluation artifact: the gate's
accuracy and failed thresholds. Per-class metrics are the readable evaluation's
(components/evaluation/evaluation_report.py), not TFMA's.

TFMA writes gzip-free TFRecord files of MetricsForSlice and ValidationResult protos. Importing
TFMA's proto modules loads TFMA, and with it TensorFlow (seconds, hundreds of MiB), for a few
numbers; so the records are read here and the few fields a summary needs are decoded from the
protobuf wire format by their field numbers (tensorflow_model_analysis/proto/*.proto;
tests/pipeline/lineage/test_metrics.py checks the answers against TFMA's own reader).
"""

from __future__ import annotations

import functools
import glob
import json
import os
import struct
from collections.abc import Iterator

HEADLINE_METRIC = "sparse_categorical_accuracy"

# Field numbers of the messages read (tensorflow_model_analysis/proto/metrics_for_slice.proto,
# validation_result.proto, config.proto).
_SLICE_KEY, _METRIC_KEYS_AND_VALUES = 1, 51  # MetricsForSlice
_SINGLE_SLICE_KEYS = 1  # SliceKey
_KEY, _VALUE = 1, 2  # MetricKeyAndValue
_NAME, _SUB_KEY, _MODEL_NAME, _IS_DIFF = 1, 3, 4, 5  # MetricKey
_DOUBLE_VALUE = 1  # MetricValue; also the `value` of google.protobuf.DoubleValue
_VALIDATIONS_PER_SLICE, _FAILURES = 2, 3  # ValidationResult, MetricsValidationForSlice
_SLICE_KEY_OF_VALIDATION = 2  # MetricsValidationForSlice
_METRIC_KEY, _METRIC_THRESHOLD, _METRIC_VALUE = 1, 2, 3  # ValidationFailure
# MetricThreshold -> its thresholds -> their fields, as TFMA's JSON names them.
_THRESHOLDS = {
    1: ("valueThreshold", {1: "lowerBound", 2: "upperBound"}),
    2: ("changeThreshold", {1: "absolute", 2: "relative", 3: "direction"}),
}
_DIRECTIONS = {0: "UNKNOWN", 1: "LOWER_IS_BETTER", 2: "HIGHER_IS_BETTER"}


def _records(evaluation_uri: str, prefix: str) -> Iterator[bytes]:
    """The records of TFMA's `<prefix>*.tfrecord` files (their CRCs are left unchecked: a
    summary reads them, TFMA wrote them whole). A remote artifact (gs://...) is read through
    TensorFlow's file systems, the one case that loads TensorFlow."""
    if "://" in evaluation_uri:
        import tensorflow as tf

        paths, opener = tf.io.gfile.glob(f"{evaluation_uri}/{prefix}*"), tf.io.gfile.GFile
    else:
        paths = glob.glob(os.path.join(glob.escape(evaluation_uri), prefix + "*"))
        opener = open
    for path in sorted(paths):
        if not path.endswith(".tfrecord"):
            continue
        with opener(path, "rb") as handle:
            while header := handle.read(12):
                (length,) = struct.unpack("<Q", header[:8])
                yield handle.read(length)
                handle.read(4)


def _varint(data: bytes, position: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        byte = data[position]
        value |= (byte & 0x7F) << shift
        position += 1
        if byte < 0x80:
            return value, position
        shift += 7


def _fields(message: bytes) -> dict[int, list]:
    """field number -> its values (ints for varints, bytes for length-delimited fields and
    8-byte doubles) of one serialized protobuf message."""
    fields: dict[int, list] = {}
    position = 0
    while position < len(message):
        tag, position = _varint(message, position)
        number, wire_type = tag >> 3, tag & 7
        if wire_type == 0:
            value, position = _varint(message, position)
        elif wire_type == 1:
            value, position = message[position : position + 8], position + 8
        elif wire_type == 2:
            length, position = _varint(message, position)
            value, position = message[position : position + length], position + length
        elif wire_type == 5:
            value, position = message[position : position + 4], position + 4
        else:
            raise ValueError(f"unsupported protobuf wire type {wire_type}")
        fields.setdefault(number, []).append(value)
    return fields


def _double(wrapper: bytes) -> float:
    """A google.protobuf.DoubleValue's value (0.0 when unset, as protobuf reads it)."""
    raw = _fields(wrapper).get(_DOUBLE_VALUE)
    return struct.unpack("<d", raw[0])[0] if raw else 0.0


def _text(fields: dict, number: int) -> str:
    return fields[number][0].decode() if number in fields else ""


def _metric_double(value: bytes) -> float | None:
    """A MetricValue's double_value, None when it holds another kind of value."""
    wrapper = _fields(value).get(_DOUBLE_VALUE)
    return _double(wrapper[0]) if wrapper else None


def _overall(evaluation_uri: str, model: str) -> Iterator[tuple[dict, float | None]]:
    """(metric key fields, double value) of every metric on the overall slice, of the candidate
    ("") or the baseline ("baseline") model, diffs left out."""
    for record in _records(evaluation_uri, "metrics"):
        metrics = _fields(record)
        slice_key = _fields(metrics.get(_SLICE_KEY, [b""])[0])
        if slice_key.get(_SINGLE_SLICE_KEYS):
            continue
        for entry in metrics.get(_METRIC_KEYS_AND_VALUES, []):
            entry = _fields(entry)
            key = _fields(entry.get(_KEY, [b""])[0])
            is_baseline = _text(key, _MODEL_NAME) == "baseline"
            if not key.get(_IS_DIFF, [0])[0] and is_baseline == (model == "baseline"):
                yield key, _metric_double(entry.get(_VALUE, [b""])[0])


@functools.lru_cache(maxsize=64)
def eval_accuracy(evaluation_uri: str) -> float | None:
    """The candidate model's accuracy on the overall slice of a ModelEvaluation artifact (not
    the baseline's, not a per-slice value, not a diff)."""
    for key, value in _overall(evaluation_uri, model=""):
        if _text(key, _NAME) == HEADLINE_METRIC and value is not None:
            return value
    return None


@functools.lru_cache(maxsize=64)
def validation_failures(evaluation_uri: str) -> str | None:
    """The TFMA thresholds a model failed: metric, its value, the threshold and, for a change
    threshold, the baseline's value; None when TFMA wrote no failures."""
    baseline = _baseline_metrics(evaluation_uri)
    lines = []
    for record in _records(evaluation_uri, "validations"):
        for per_slice in _fields(record).get(_VALIDATIONS_PER_SLICE, []):
            for failure in _fields(per_slice).get(_FAILURES, []):
                failure = _fields(failure)
                key = _fields(failure.get(_METRIC_KEY, [b""])[0])
                name, is_diff = _text(key, _NAME), bool(key.get(_IS_DIFF, [0])[0])
                value = _metric_double(failure.get(_METRIC_VALUE, [b""])[0])
                threshold = _threshold(failure.get(_METRIC_THRESHOLD, [b""])[0])
                shown = f"{value:.4f}" if value is not None else "(not a number)"
                line = (
                    f"{'change in ' if is_diff else ''}{name} {shown} fails threshold "
                    f"{json.dumps(threshold)}"
                )
                if is_diff and name in baseline:
                    line += f" (baseline {baseline[name]:.4f})"
                lines.append(line)
    return "; ".join(lines) or None


def _threshold(message: bytes) -> dict:
    """A MetricThreshold as TFMA's JSON shows it, e.g. {"valueThreshold": {"lowerBound": 0.9}}."""
    shown = {}
    for number, raw in _fields(message).items():
        if number not in _THRESHOLDS:
            continue
        name, members = _THRESHOLDS[number]
        inner = {}
        for field, values in _fields(raw[0]).items():
            if members.get(field) == "direction":
                inner["direction"] = _DIRECTIONS.get(values[0], str(values[0]))
            elif field in members:
                inner[members[field]] = _double(values[0])
        shown[name] = inner
    return shown


def _baseline_metrics(evaluation_uri: str) -> dict[str, float]:
    return {
        _text(key, _NAME): value
        for key, value in _overall(evaluation_uri, model="baseline")
        if value is not None and not any(key.get(_SUB_KEY, []))
    }
