"""DataGate's executor on hand-made validator outputs: it stops a span naming each problem (and
records why in the executor's result), lets a clean span through, and obeys the class policy."""

import json

import pytest
from tensorflow_metadata.proto.v0 import anomalies_pb2
from tfx.dsl.components.base import base_executor
from tfx.types import artifact_utils, standard_artifacts

from components import metadata_keys
from components.artifacts import IngestReport
from components.validation import data_gate
from data_prep.quality import health
from data_prep.reading.inspection import ACCEPTED, FileOutcome
from data_prep.reading.sources import SourceFile
from data_prep.writing.ingest_outputs import CLASS_HISTOGRAMS
from data_prep.writing.plan import class_histograms
from tests.components.validation.size_statistics import size_statistics

REFERENCE = {"circle": 0, "square": 1, "triangle": 2}


def _anomalies(root, folder, split, anomalies=None):
    artifact = standard_artifacts.ExampleAnomalies()
    artifact.uri = str(root)
    if anomalies is None:  # DistributionValidator without a baseline writes nothing
        return artifact
    artifact.split_names = artifact_utils.encode_split_names([split])
    (root / f"{folder}-{split}").mkdir(parents=True)
    (root / f"{folder}-{split}" / data_gate.ANOMALIES_FILE).write_bytes(
        anomalies.SerializeToString()
    )
    return artifact


def _drift(feature, description):
    anomalies = anomalies_pb2.Anomalies()
    reason = anomalies.anomaly_info[feature].reason.add()
    reason.short_description = "High Linfty distance between current and previous"
    reason.description = description
    return anomalies


def _statistics(root, sides):
    """An ExampleStatistics artifact of a train split whose images are sides x sides."""
    artifact = standard_artifacts.ExampleStatistics()
    artifact.uri = str(root)
    artifact.split_names = artifact_utils.encode_split_names(["train"])
    (root / "Split-train").mkdir(parents=True)
    (root / "Split-train" / "FeatureStats.pb").write_bytes(
        size_statistics(sides).SerializeToString()
    )
    return artifact


def _images(count, side=28, level=120, label="circle"):
    """The ingest's outcomes of `count` accepted images of a class, `side` pixels square, of
    one mean brightness level."""
    gray = bytes([level]) * health.GRAY_SIDE**2
    return [
        FileOutcome(
            SourceFile(f"{label}/{side}-{level}-{i}.png", "", label),
            ACCEPTED,
            height=side,
            width=side,
            signals=health.ImageSignals(i, gray, 7.0, ()),
        )
        for i in range(count)
    ]


def _report(root, label_map, near_duplicates=0.0, images=None):
    """An IngestReport as ImageExampleGen records it (the gate reads its recorded label map and
    near-duplicate share) and its report file, whose train split holds these images' counts per
    class (None: a report without them)."""
    report = IngestReport()
    report.uri = str(root)
    root.mkdir(parents=True)
    written = {"label_map": label_map}
    if images is not None:
        written[CLASS_HISTOGRAMS] = class_histograms({"train": images})
    (root / "ingest_report.json").write_text(json.dumps(written))
    report.set_string_custom_property(metadata_keys.LABEL_MAP_PROPERTY, json.dumps(label_map))
    report.set_int_custom_property("span", 2)
    report.set_float_custom_property(
        metadata_keys.NEAR_DUPLICATE_FRACTION_PROPERTY, near_duplicates
    )
    return report


def _run(
    tmp_path,
    label_map,
    drift=None,
    allow=False,
    reads_results=True,
    near_duplicates=0.0,
    limit=1.0,
    sides=([28] * 100, [28] * 100),
    images=(None, None),
    baseline_report=True,
):
    """The gate's executor as a launcher that reads execution results (the local runner's)
    runs it, or as TFX's legacy launcher (Airflow's) does, with no executor output path. sides:
    the span's and the baseline's image sides in their statistics (a None baseline: the first
    span); images: the outcomes their ingest reports count per class (None: a report without
    counts per class); baseline_report: whether the baseline data's report is given."""
    verdict = data_gate.DataVerdict()
    context = base_executor.BaseExecutor.Context(
        executor_output_uri=str(tmp_path / "executor_output.pb") if reads_results else None
    )
    output = data_gate.Executor(context).Do(
        {
            data_gate.ANOMALIES_KEY: [
                _anomalies(tmp_path / "schema", "Split", "train", anomalies_pb2.Anomalies())
            ],
            data_gate.DRIFT_KEY: [
                _anomalies(tmp_path / "drift", "SplitPair", "train_train", drift)
            ],
            data_gate.INGEST_REPORT_KEY: [
                _report(tmp_path / "report", label_map, near_duplicates, images[0])
            ],
            data_gate.BASELINE_INGEST_REPORT_KEY: [
                _report(tmp_path / "baseline_report", REFERENCE, images=images[1])
            ]
            if sides[1] is not None and baseline_report
            else [],
            data_gate.STATISTICS_KEY: [_statistics(tmp_path / "statistics", sides[0])],
            data_gate.BASELINE_KEY: []
            if sides[1] is None
            else [_statistics(tmp_path / "baseline", sides[1])],
        },
        {data_gate.VERDICT_KEY: [verdict]},
        {
            data_gate.REFERENCE_LABEL_MAP_KEY: json.dumps(REFERENCE),
            data_gate.ALLOW_CLASS_CHANGES_KEY: int(allow),
            data_gate.PIPELINE_KEY: "shapes",
            data_gate.MAX_NEAR_DUPLICATE_FRACTION_KEY: limit,
            data_gate.DRIFT_SPLIT_KEY: "train",
            data_gate.IMAGE_SIZE_SHARE_KEY: 0.2,
            data_gate.BRIGHTNESS_SHARE_KEY: 0.2,
        },
    )
    return output, verdict


def test_a_clean_span_passes_with_no_class_change(tmp_path):
    output, verdict = _run(tmp_path, REFERENCE)
    assert output is None
    assert verdict.get_string_custom_property(metadata_keys.CLASS_CHANGE_PROPERTY) == ""


def test_drift_stops_the_span_naming_feature_value_and_threshold(tmp_path):
    text = (
        "The Linfty distance between current and previous is 1 (up to six significant "
        "digits), above the threshold 0.2."
    )
    output, _ = _run(tmp_path, REFERENCE, drift=_drift("image_format", text))
    assert output.execution_result.code == data_gate.STOPPED_CODE
    message = output.execution_result.result_message
    assert message.startswith("data gate stopped span 2 before training:")
    assert "drift: train_train: feature 'image_format': High Linfty distance" in message
    assert "is 1 (up to six significant digits), above the threshold 0.2" in message
    assert message.endswith("; to let this span through: --set gate.image_format_linf=1")


def _distances(verdict):
    recorded = verdict.get_string_custom_property(metadata_keys.DRIFT_DISTANCES_PROPERTY)
    return {d["feature"]: d for d in json.loads(recorded)}


def _classes(verdict):
    recorded = verdict.get_string_custom_property(metadata_keys.DRIFT_CLASSES_PROPERTY)
    return json.loads(recorded) if recorded else None


def _stop_line(feature, distance, classes, setting):
    return (
        f"drift: train_train: feature '{feature}': L-infinity distance between the CDFs (share "
        f"of images moved) is {distance} ({classes}), above the threshold 0.2; to let this span "
        f"through: --set gate.{setting}={float(distance):g}"
    )


def test_five_odd_sized_images_in_five_thousand_pass_and_the_verdict_records_it(tmp_path):
    span = _images(4995) + _images(5, side=56)
    output, verdict = _run(tmp_path, REFERENCE, images=(span, _images(5000)))
    assert output is None
    recorded = _distances(verdict)
    assert set(recorded) == {"height", "width", "brightness"}
    assert recorded["height"] == {
        "feature": "height",
        "distance": pytest.approx(0.001),
        "threshold": 0.2,
        "images": 5000,
        "baseline_images": 5000,
        "floor": pytest.approx(0.039, abs=0.001),
        "passed": True,
    }
    assert _classes(verdict) == {
        "shared": sorted(REFERENCE),
        "new": [],
        "gone": [],
        "whole_split": "",
    }


def test_a_third_of_the_images_at_another_size_stop_the_span(tmp_path):
    span = _images(3500) + _images(1500, side=56)
    output, _ = _run(tmp_path, REFERENCE, images=(span, _images(5000)))
    message = output.execution_result.result_message
    for feature in ("height", "width"):
        assert _stop_line(feature, "0.300", "on 3 shared classes", "image_size_share") in message
    assert "'brightness'" not in message


def test_a_handful_of_darker_images_pass_and_the_verdict_records_the_brightness(tmp_path):
    span = _images(995) + _images(5, level=60)
    output, verdict = _run(tmp_path, REFERENCE, images=(span, _images(1000)))
    assert output is None
    assert _distances(verdict)["brightness"] == {
        "feature": "brightness",
        "distance": pytest.approx(0.005),
        "threshold": 0.2,
        "images": 1000,
        "baseline_images": 1000,
        "floor": pytest.approx(0.087, abs=0.001),
        "passed": True,
    }


def test_a_third_of_the_images_darker_stop_the_span(tmp_path):
    span = _images(700) + _images(300, level=90)
    output, _ = _run(tmp_path, REFERENCE, images=(span, _images(1000)))
    assert _stop_line("brightness", "0.300", "on 3 shared classes", "brightness_share") in (
        output.execution_result.result_message
    )


def test_on_a_small_span_chance_passes_and_a_whole_change_stops(tmp_path):
    # 30 images: 8 of them (0.27) at another brightness is what two draws of one source differ
    # by; every image at another size is not.
    darker = _images(22) + _images(8, level=90)
    output, verdict = _run(tmp_path / "chance", REFERENCE, images=(darker, _images(30)))
    assert output is None
    brightness = _distances(verdict)["brightness"]
    assert brightness["distance"] == pytest.approx(0.267, abs=0.001)
    assert brightness["floor"] == pytest.approx(0.503, abs=0.001) and brightness["passed"]
    output, _ = _run(tmp_path / "whole", REFERENCE, images=(_images(30, side=56), _images(30)))
    assert output.execution_result.code == data_gate.STOPPED_CODE
    assert "above the threshold 0.2 and the noise floor 0.50 of 30 against 30 images" in (
        output.execution_result.result_message
    )


def test_an_allowed_new_class_moves_no_distance_while_the_shared_classes_still_count(tmp_path):
    with_cross = {**REFERENCE, "cross": 3}
    baseline = _images(700) + _images(700, label="square")
    # A third of the span's images in the new class, darker and larger than all others.
    cross = _images(700, side=56, level=40, label="cross")
    output, verdict = _run(
        tmp_path / "allowed", with_cross, allow=True, images=(baseline + cross, baseline)
    )
    assert output is None
    assert {f: d["distance"] for f, d in _distances(verdict).items()} == {
        "height": 0.0,
        "width": 0.0,
        "brightness": 0.0,
    }
    assert _classes(verdict)["new"] == ["cross"]
    assert verdict.get_string_custom_property(metadata_keys.CLASS_CHANGE_PROPERTY) == (
        "new class(es) cross"
    )
    # The shared classes' own shift still stops the span, saying what was compared.
    darker = _images(700) + _images(700, level=90, label="square")
    output, _ = _run(tmp_path / "darker", with_cross, allow=True, images=(darker + cross, baseline))
    assert (
        _stop_line(
            "brightness",
            "0.500",
            "on 3 shared classes; 1 new class not compared",
            "brightness_share",
        )
        in output.execution_result.result_message
    )


def test_a_baseline_report_without_counts_per_class_measures_the_whole_split_sizes(tmp_path):
    output, _ = _run(
        tmp_path,
        REFERENCE,
        sides=([28] * 3500 + [56] * 1500, [28] * 5000),
        images=(_images(100), None),
    )
    whole = "on the whole split, image sizes only (an ingest report without counts per class)"
    assert _stop_line("height", "0.300", whole, "image_size_share") in (
        output.execution_result.result_message
    )
    output, verdict = _run(tmp_path / "passing", REFERENCE, images=(_images(100), None))
    assert output is None
    assert set(_distances(verdict)) == {"height", "width"}
    assert _classes(verdict)["whole_split"] == "an ingest report without counts per class"


def test_a_baseline_of_statistics_alone_measures_the_whole_split_sizes(tmp_path):
    output, verdict = _run(
        tmp_path,
        REFERENCE,
        sides=([28] * 4995 + [56] * 5, [28] * 5000),
        images=(_images(100), _images(100)),
        baseline_report=False,
    )
    assert output is None
    assert _distances(verdict)["height"]["distance"] == pytest.approx(0.001)
    assert set(_distances(verdict)) == {"height", "width"}
    assert _classes(verdict)["whole_split"] == "no ingest report of the baseline data"


def test_without_a_baseline_no_distance_is_measured(tmp_path):
    output, verdict = _run(tmp_path, REFERENCE, sides=([28] * 10, None))
    assert output is None
    assert _distances(verdict) == {}
    assert _classes(verdict) is None


def test_the_let_through_setting_is_the_measured_distance_rounded_up():
    line = "The distance is 0.2314 (up to six significant digits), above the threshold 0.2."
    assert data_gate.let_through("label_name", line) == (
        "; to let this span through: --set gate.class_distribution_linf=0.24"
    )
    assert data_gate.let_through("image_format", line.replace("0.2314", "0.3")).endswith(
        "--set gate.image_format_linf=0.3"
    )
    assert data_gate.let_through("sha256", line) == ""
    assert data_gate.let_through("label_name", "no distance here") == ""


def test_a_new_class_stops_unless_allowed_and_then_its_share_drift_is_expected(tmp_path):
    with_cross = {**REFERENCE, "cross": 3}
    output, _ = _run(tmp_path / "stopped", with_cross)
    message = output.execution_result.result_message
    assert (
        "classes: new class(es) cross against the pipeline's classes (circle, square, " in message
    )
    assert "to train a model with the new head: --set gate.allow_class_changes=true" in message

    share = _drift("label_name", "The Linfty distance ... is 0.25, above the threshold 0.2.")
    output, verdict = _run(tmp_path / "allowed", with_cross, drift=share, allow=True)
    assert output is None
    assert verdict.get_string_custom_property(metadata_keys.CLASS_CHANGE_PROPERTY) == (
        "new class(es) cross"
    )


def test_a_gone_class_stops_even_when_changes_are_allowed(tmp_path):
    output, _ = _run(tmp_path, {"circle": 0, "square": 1, "cross": 3}, allow=True)
    message = output.execution_result.result_message
    assert "new class(es) cross and class(es) gone triangle" in message
    assert "put its images back" in message
    # The exact setting that trains the classes left, as a pipeline of their own.
    assert message.endswith("--set name=shapes-without-triangle")


def test_a_launcher_that_reads_no_results_gets_the_stop_as_an_exception(tmp_path):
    with pytest.raises(data_gate.SpanStopped) as stopped:
        _run(tmp_path, {**REFERENCE, "cross": 3}, reads_results=False)
    assert str(stopped.value).startswith("data gate stopped span 2 before training:")
    assert "new class(es) cross" in str(stopped.value)
    output, _ = _run(tmp_path / "clean", REFERENCE, reads_results=False)
    assert output is None  # a clean span passes the same way on every launcher


def test_too_many_near_duplicates_stop_the_span_only_above_the_limit(tmp_path):
    output, _ = _run(tmp_path / "stopped", REFERENCE, near_duplicates=0.12, limit=0.05)
    message = output.execution_result.result_message
    assert (
        "near-duplicates: 12.0% of the distinct images are in near-duplicate clusters "
        "> gate.max_near_duplicate_fraction 5.0%" in message
    )
    output, _ = _run(tmp_path / "passed", REFERENCE, near_duplicates=0.05, limit=0.05)
    assert output is None
