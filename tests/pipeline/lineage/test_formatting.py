"""The run summary text that `imgpipe run` prints and the Airflow summary task logs."""

import dataclasses

from pipeline import exit_codes
from pipeline.lineage import ComponentRun, PipelineRun
from pipeline.lineage.formatting import format_run_summary

RUN = PipelineRun(
    run_id="2026-01-01T10:00:00",
    pipeline="imgpipe",
    started="2026-01-01 10:00:00",
    seconds=42.0,
    status="complete",
    components=(ComponentRun("ImageExampleGen", "ran", 3.0, 1),),
    span=2,
    new_data=True,
    ingest_counts={"found": 12, "accepted": 10, "rejected": 3, "ignored": 1},
    rejected_per_reason={"corrupt": 1, "conflicting_label": 2},
    ingest_report="/build/tfx/report.json",
    classes_left_out=("owl",),
    eval_accuracy=0.91234,
    blessed=True,
    pushed_to="/build/serving/imgpipe/1",
    serving_check={"blessed": True},
    tflite={
        "float16_accuracy_gap_points": 0.5,
        "float16_bytes": 3 * 2**19,
        "float16_latency_p50_ms": 0.25,
        "int8_accuracy_gap_points": 2.5,
        "int8_refused": "int8 accuracy 0.8750 is 2.50 points below the SavedModel's 0.9000",
        "saved_model_accuracy": 0.9,
    },
    model_card="/build/serving/imgpipe/1/model_card",
)


def test_a_pushed_run_says_its_data_accuracy_push_and_reports():
    lines = format_run_summary(RUN, min_accuracy=0.8).splitlines()
    assert lines[:7] == [
        "run 2026-01-01T10:00:00 of pipeline imgpipe: complete",
        "data: span 2 (new data, ingested now): 12 found, 10 accepted, 3 rejected, 1 ignored "
        "files; /build/tfx/report.json",
        "data: rejected 3: conflicting_label 2, corrupt 1",
        "data: class 'owl' has no usable image and was left out",
        "eval accuracy: 0.9123 (threshold 0.8)",
        "blessed: yes",
        "pushed: /build/serving/imgpipe/1",
    ]
    assert "serving check: passed" in lines
    assert (
        "TFLite against the SavedModel (accuracy gap, size, one-image latency): "
        "float16 +0.50 points, 1.50 MiB, p50 0.25 ms; int8 +2.50 points"
    ) in lines
    assert (
        "TFLite int8 refused: int8 accuracy 0.8750 is 2.50 points below the SavedModel's 0.9000"
    ) in lines
    assert lines[-1] == "model card: /build/serving/imgpipe/1/model_card"


def test_a_run_whose_tflite_conversions_all_failed_says_so():
    failed = dataclasses.replace(RUN, tflite={"saved_model_accuracy": 0.9})
    lines = format_run_summary(failed).splitlines()
    assert (
        "TFLite against the SavedModel (accuracy gap, size, one-image latency): no model "
        "converted (the model card says why)"
    ) in lines


def test_a_stopped_run_says_which_stage_stopped_it_and_why():
    stopped = dataclasses.replace(
        RUN,
        blessed=False,
        pushed_to=None,
        serving_check=None,
        tflite=None,
        model_card=None,
        stopped_by=exit_codes.STOPPED_BY_EVALUATOR,
        not_pushed_reason="accuracy 0.91 is below the lower bound 0.95",
    )
    lines = format_run_summary(stopped).splitlines()
    assert "eval accuracy: 0.9123" in lines  # no threshold named: none given
    assert lines[-3:] == [
        "blessed: no",
        "pushed: no",
        "not pushed, stopped by the evaluator: accuracy 0.91 is below the lower bound 0.95",
    ]


def test_a_run_with_a_data_health_report_says_what_it_found_in_one_line():
    health = {
        "near_duplicate_clusters": 3,
        "near_duplicate_images": 7,
        "near_duplicate_fraction": 0.0125,
        "odd_images": 4,
        "label_issues": 2,
        "eval_images_checked": 60,
        "uri": "/build/tfx/DataHealthGen/data_health/9",
    }
    lines = format_run_summary(dataclasses.replace(RUN, data_health=health)).splitlines()
    assert (
        "data health: 3 near-duplicate cluster(s) (7 images, 1.2%), 4 odd image(s), 2 likely "
        "mislabelled image(s) among 60 eval images; health.json in /build/tfx/DataHealthGen/"
        "data_health/9"
    ) in lines
    assert not any(line.startswith("data health") for line in format_run_summary(RUN).split("\n"))


def test_the_summary_says_how_training_ended_and_what_was_exported():
    stopped = {
        "epochs": 30,
        "epochs_trained": 12,
        "exported_epoch": 7,
        "restored_best": 1,
        "stop_reason": "early stopping: eval accuracy did not improve by more than 0 in 5 "
        "validations after epoch 7",
        "warm_started_from_model_id": 4,
    }
    lines = format_run_summary(dataclasses.replace(RUN, training_outcome=stopped)).splitlines()
    assert (
        "training: 12 of 30 epochs (early stopping: eval accuracy did not improve by more than 0 "
        "in 5 validations after epoch 7); exported epoch 7 (the best validation); warm-started "
        "from model 4"
    ) in lines
    full = {
        "epochs": 5,
        "epochs_trained": 5,
        "exported_epoch": 5,
        "stop_reason": "the schedule ended",
    }
    lines = format_run_summary(dataclasses.replace(RUN, training_outcome=full)).splitlines()
    assert "training: 5 epochs (the schedule ended); exported epoch 5 (the last)" in lines


def test_a_held_out_test_split_is_shown_beside_eval_in_the_summary_and_the_runs_table():
    from pipeline.lineage.formatting import format_runs

    run = dataclasses.replace(RUN, test_accuracy=0.88)
    lines = format_run_summary(run, min_accuracy=0.8).splitlines()
    index = lines.index("eval accuracy: 0.9123 (threshold 0.8)")
    assert lines[index + 1] == "test accuracy: 0.8800 (held out; no decision uses it)"
    header, row = format_runs([run]).splitlines()[:2]
    assert header.split()[5:9] == ["EVAL", "ACC", "TEST", "ACC"]
    assert row.split()[7:9] == ["0.9123", "0.8800"]
    assert "test accuracy" not in format_run_summary(RUN)


def test_a_passing_span_shows_each_distance_against_its_threshold_and_the_classes_compared():
    distances = (
        {"feature": "height", "distance": 0.001, "threshold": 0.2, "passed": True},
        {"feature": "width", "distance": 0.001, "threshold": 0.2, "passed": True},
        {"feature": "brightness", "distance": 0.012, "threshold": 0.2, "passed": True},
    )
    lines = format_run_summary(dataclasses.replace(RUN, gate_distances=distances)).splitlines()
    assert (
        "data gate, share of images moved since the baseline data: height 0.001 "
        "(threshold 0.2): pass; width 0.001 (threshold 0.2): pass; brightness 0.012 "
        "(threshold 0.2): pass"
    ) in lines
    classes = {"shared": list("012345678"), "new": ["9"], "gone": [], "whole_split": ""}
    run = dataclasses.replace(RUN, gate_distances=distances, gate_classes=classes)
    assert (
        "data gate, share of images moved since the baseline data (on 9 shared classes; 1 new "
        "class not compared): height 0.001 (threshold 0.2): pass"
    ) in format_run_summary(run)
    assert not any(line.startswith("data gate") for line in format_run_summary(RUN).split("\n"))


def test_a_named_run_is_named_beside_its_id_in_the_table_the_summary_and_the_diff():
    from pipeline.lineage import RunDiff
    from pipeline.lineage.formatting import NAME_WIDTH, format_diff, format_runs

    named = dataclasses.replace(RUN, name="lr sweep: 0.01, warm start from yesterday's blessed")
    assert format_run_summary(named).splitlines()[0] == (
        f'run {RUN.run_id} "{named.name}" of pipeline imgpipe: {named.status_words}'
    )
    header, first, _, second = format_runs([named, RUN]).splitlines()[:4]
    assert header.split()[:3] == ["RUN", "NAME", "PIPELINE"]
    shown = named.name[: NAME_WIDTH - 3] + "..."
    assert first.startswith(f"{RUN.run_id}  {shown}  imgpipe")
    assert second.split()[:2] == [RUN.run_id, "imgpipe"]  # no name: an empty cell
    assert "NAME" not in format_runs([RUN]).splitlines()[0]  # no run named: no column
    diff = format_diff(RunDiff("a1", "b2", (), 7, named.name, None)).splitlines()
    assert diff[:2] == [f'A: a1 "{named.name}"', "B: b2"]


def test_the_lineage_names_the_runs_an_execution_belongs_to_beside_their_ids():
    from pipeline.lineage import ExecutionRecord
    from pipeline.lineage.formatting import _runs

    trainer = ExecutionRecord(3, "Trainer", "ran", "t", 1.0, ("r1", "r2"), {}, {"r2": "wide"})
    assert _runs(trainer) == 'runs r1, r2 "wide"'
    assert _runs(ExecutionRecord(3, "Trainer", "ran", "t", 1.0, ("r1",), {})) == "run r1"


def test_a_no_regression_comparison_on_another_eval_set_says_what_changed():
    changed = {"compared": 980, "kept": 945, "gone": 20, "trained_on": 0}
    lines = format_run_summary(dataclasses.replace(RUN, eval_overlap=changed)).splitlines()
    assert "no-regression compared on 980 eval images: 20 of the baseline's are gone, 35 new" in (
        lines
    )
    same = {"compared": 980, "kept": 980, "gone": 0, "trained_on": 0}
    summary = format_run_summary(dataclasses.replace(RUN, eval_overlap=same))
    assert "no-regression" not in summary and "no-regression" not in format_run_summary(RUN)
