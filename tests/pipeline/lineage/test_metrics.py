"""The TFMA records a run summary reads, decoded without TFMA, against TFMA's own protos and
readers: records written with TFMA's messages and TensorFlow's TFRecord writer."""

import json

import pytest
import tensorflow as tf
import tensorflow_model_analysis as tfma
from google.protobuf import json_format
from tensorflow_model_analysis.proto import (
    config_pb2,
    metrics_for_slice_pb2,
    validation_result_pb2,
)

from pipeline.lineage import metrics

ACCURACY = metrics.HEADLINE_METRIC


def _entry(name, value, model_name="", is_diff=False, class_id=None):
    entry = metrics_for_slice_pb2.MetricsForSlice.MetricKeyAndValue()
    entry.key.name, entry.key.model_name, entry.key.is_diff = name, model_name, is_diff
    if class_id is not None:
        entry.key.sub_key.class_id.value = class_id
    entry.value.double_value.value = value
    return entry


def _write(path, messages):
    with tf.io.TFRecordWriter(str(path)) as writer:
        for message in messages:
            writer.write(message.SerializeToString())


@pytest.fixture
def evaluation(tmp_path):
    """An evaluation of a candidate against a baseline, with a per-class slice and a failed
    change threshold."""
    overall = metrics_for_slice_pb2.MetricsForSlice()
    overall.metric_keys_and_values.extend(
        [
            _entry(ACCURACY, 0.75, "candidate"),
            _entry(ACCURACY, 0.8, "baseline"),
            _entry(ACCURACY, -0.05, "candidate", is_diff=True),
            _entry("recall", 0.5, "baseline", class_id=1),
        ]
    )
    sliced = metrics_for_slice_pb2.MetricsForSlice()
    key = sliced.slice_key.single_slice_keys.add()
    key.column, key.bytes_value = "label_name", b"cat"
    sliced.metric_keys_and_values.append(_entry(ACCURACY, 0.1, "candidate"))
    _write(tmp_path / "metrics-00000-of-00001.tfrecord", [sliced, overall])

    result = validation_result_pb2.ValidationResult(validation_ok=False)
    failure = result.metric_validations_per_slice.add().failures.add()
    failure.metric_key.name, failure.metric_key.is_diff = ACCURACY, True
    failure.metric_threshold.change_threshold.absolute.value = -1e-10
    failure.metric_threshold.change_threshold.direction = (
        config_pb2.MetricDirection.HIGHER_IS_BETTER
    )
    failure.metric_value.double_value.value = -0.05
    floor = result.metric_validations_per_slice[0].failures.add()
    floor.metric_key.name = ACCURACY
    floor.metric_threshold.value_threshold.lower_bound.value = 0.9
    floor.metric_value.double_value.value = 0.75
    _write(tmp_path / "validations.tfrecord", [result])
    return str(tmp_path), result


def test_accuracy_is_the_candidates_on_the_overall_slice_as_tfma_reads_it(evaluation):
    uri, _ = evaluation
    assert metrics.eval_accuracy(uri) == 0.75
    (overall,) = [m for m in tfma.load_metrics(uri) if not m.slice_key.single_slice_keys]
    assert metrics._baseline_metrics(uri) == {ACCURACY: 0.8}  # the per-class recall left out
    assert len(overall.metric_keys_and_values) == 4


def test_failed_thresholds_read_as_tfma_writes_them(evaluation):
    uri, result = evaluation
    change, floor = result.metric_validations_per_slice[0].failures
    assert tfma.load_validation_result(uri) == result
    expected = (
        f"change in {ACCURACY} -0.0500 fails threshold "
        f"{json.dumps(json_format.MessageToDict(change.metric_threshold))} (baseline 0.8000); "
        f"{ACCURACY} 0.7500 fails threshold "
        f"{json.dumps(json_format.MessageToDict(floor.metric_threshold))}"
    )
    assert metrics.validation_failures(uri) == expected


def test_an_evaluation_without_records_has_no_answers(tmp_path):
    assert metrics.eval_accuracy(str(tmp_path)) is None
    assert metrics.validation_failures(str(tmp_path)) is None
