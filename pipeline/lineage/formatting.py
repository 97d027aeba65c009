"""Tables and JSON for the answers the pipeline/lineage package computes (no store access here)."""

from __future__ import annotations

import dataclasses
import json

from components import metadata_keys
from components.validation.drift_record import ClassScope, Distance
from pipeline.lineage import (
    STOPPED_BY_GATE,
    Dataset,
    ExamplesLineage,
    ExecutionRecord,
    ImageLineage,
    ModelLineage,
    PipelineRun,
    PredictionsFileLineage,
    PredictionsLineage,
    RunDiff,
    TrainedModel,
)
from pipeline.lineage.eval_overlap import EvalOverlap
from pipeline.lineage.predictions_edits import MAX_LISTED


def to_json(answer) -> str:
    """Any answer (a dataclass or a list of them) as indented JSON."""
    plain = (
        [dataclasses.asdict(item) for item in answer]
        if isinstance(answer, (list, tuple))
        else dataclasses.asdict(answer)
    )
    return json.dumps(plain, indent=2, sort_keys=True, default=str)


def _table(rows: list[tuple], header: tuple | None = None) -> list[str]:
    rows = [tuple("" if cell is None else str(cell) for cell in row) for row in rows]
    if header:
        rows.insert(0, header)
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    return [
        "  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip()
        for row in rows
    ]


def _seconds(value: float) -> str:
    return f"{value:.1f} s" if value < 120 else f"{value / 60:.1f} min"


def _accuracy(value: float | None) -> str:
    return "-" if value is None else f"{value:.4f}"


def _yes_no(value: bool | None) -> str:
    return "-" if value is None else "yes" if value else "no"


def _pushed(run: PipelineRun) -> str:
    if not run.pushed_to:
        return "no"
    states = {c.node: c.state for c in run.components}
    reused = "(reused) " if states.get("Pusher") == "cached" else ""
    return f"{reused}{run.pushed_to}"


WHY_WIDTH = 72  # the table shows the reason's start; --json has all of it
NAME_WIDTH = 32  # a run's name or note in the table: its start; the run's summary has all of it


def _shortened(text: str, width: int) -> str:
    return text if len(text) <= width else text[: width - 3] + "..."


def run_title(run: PipelineRun) -> str:
    """A run as the console names it: its id, and its name or note in quotes when it has one."""
    return f'{run.run_id} "{run.name}"' if run.name else run.run_id


def _why_not_pushed(run: PipelineRun) -> str:
    if not run.not_pushed_reason:
        return ""
    lines = [line.strip() for line in run.not_pushed_reason.splitlines() if line.strip()]
    # The gate's first line only says it stopped; its next line names the first problem.
    detail = lines[1] if len(lines) > 1 and run.stopped_by == STOPPED_BY_GATE else lines[0]
    return _shortened(f"{run.stopped_by}: {detail}", WHY_WIDTH)


def format_runs(runs: list[PipelineRun]) -> str:
    """The runs table; a NAME column beside RUN when any listed run has a name or note."""
    named = any(run.name for run in runs)
    header = (
        "RUN",
        *(("NAME",) if named else ()),
        "PIPELINE",
        "STARTED",
        "TIME",
        "STATUS",
        "EVAL ACC",
        "TEST ACC",
        "BLESSED",
        "PUSHED",
        "WHY NOT PUSHED",
    )
    rows = [
        (
            run.run_id,
            *((_shortened(run.name or "", NAME_WIDTH),) if named else ()),
            run.pipeline,
            run.started,
            _seconds(run.seconds),
            run.status,
            _accuracy(run.eval_accuracy),
            _accuracy(run.test_accuracy),
            _yes_no(run.blessed),
            _pushed(run),
            _why_not_pushed(run),
        )
        for run in runs
    ]
    lines = _table(rows, header)
    out = lines[:1]
    for run, line in zip(runs, lines[1:], strict=True):
        out.append(line)
        by_state: dict[str, list[str]] = {}
        for component in run.components:
            by_state.setdefault(component.state, []).append(component.node)
        out.append(
            "    " + "; ".join(f"{state}: {', '.join(nodes)}" for state, nodes in by_state.items())
        )
        if run.eval_warning:
            out.append(f"    caution: {run.eval_warning}")
    return "\n".join(out)


def format_run_summary(run: PipelineRun, min_accuracy: float | None = None) -> str:
    """One run's summary, as `imgpipe run` prints it and the Airflow summary task logs it: its
    status, data, evaluation, outcome (pushed, or why not), training and the model's reports.
    min_accuracy: the accuracy floor the run was held to, shown beside the accuracy."""
    from data_prep.writing.plan import left_out_message, rejections_line

    lines = [f"run {run_title(run)} of pipeline {run.pipeline}: {run.status_words}"]
    if run.span is not None:
        news = "new data, ingested now" if run.new_data else "unchanged input, from the cache"
        counts = ", ".join(f"{count} {name}" for name, count in run.ingest_counts.items())
        lines.append(f"data: span {run.span} ({news}): {counts} files; {run.ingest_report}")
        if run.rejected_per_reason:
            lines.append(f"data: {rejections_line(run.rejected_per_reason)}")
        lines += [f"data: {left_out_message(name)}" for name in run.classes_left_out]
    if run.eval_accuracy is not None:
        floor = "" if min_accuracy is None else f" (threshold {min_accuracy})"
        lines.append(f"eval accuracy: {run.eval_accuracy:.4f}{floor}")
    if run.test_accuracy is not None:
        lines.append(f"test accuracy: {run.test_accuracy:.4f} (held out; no decision uses it)")
    if run.eval_warning:
        lines.append(f"caution: {run.eval_warning}")
    if run.blessed is not None:
        lines.append(f"blessed: {_yes_no(run.blessed)}")
    lines.append(f"pushed: {run.pushed_to or 'no'}")
    if run.not_pushed_reason:
        lines.append(f"not pushed, stopped by the {run.stopped_by}: {run.not_pushed_reason}")
    if run.gate_distances:
        lines.append(gate_distances_line(run.gate_distances, run.gate_classes))
    if run.baseline_skipped:
        lines.append(f"baseline comparison skipped: {run.baseline_skipped}")
    overlap = EvalOverlap(**run.eval_overlap) if run.eval_overlap else None
    if overlap is not None and overlap.changed:  # the same eval set needs no word
        lines.append(overlap.describe())
    if run.training_outcome:
        lines.append(training_outcome_line(run.training_outcome))
    if run.training_performance:
        perf = run.training_performance
        lines.append(
            f"training: {perf['images_per_second']:.1f} images/s, step "
            f"{perf['step_time_seconds'] * 1000:.1f} ms, input wait "
            f"{perf['input_wait_share']:.0%}, {perf['precision']}, XLA {bool(perf['xla'])}, "
            f"{perf['replicas']} replica(s), {perf['retraces']} retrace(s)"
        )
    return "\n".join(lines + _model_report_lines(run))


def gate_distances_line(distances: tuple[dict, ...], classes: dict | None) -> str:
    """The image size and brightness drift the data gate measured against the baseline data,
    each against its threshold, and the classes it measured it on (when recorded)."""
    described = "; ".join(Distance.from_record(d).describe() for d in distances)
    scope = "" if classes is None else f" ({ClassScope(**classes).describe()})"
    return f"data gate, share of images moved since the baseline data{scope}: {described}"


def training_outcome_line(outcome: dict) -> str:
    """How many epochs trained and why it stopped, which epoch's weights were exported, and the
    model a warm start began from."""
    planned = outcome.get("epochs")
    trained = outcome.get("epochs_trained", planned)
    of = f" of {planned:g}" if planned is not None and trained != planned else ""
    line = f"training: {trained:g}{of} epochs ({outcome.get('stop_reason', 'the schedule ended')})"
    if "exported_epoch" in outcome:
        which = "the best validation" if outcome.get("restored_best") else "the last"
        line += f"; exported epoch {outcome['exported_epoch']:g} ({which})"
    base = outcome.get(metadata_keys.WARM_STARTED_FROM_PROPERTY)
    if base is not None:
        line += f"; warm-started from model {base}"
    return line


def _model_report_lines(run: PipelineRun) -> list[str]:
    """The serving check, the readable evaluation, TFLite, the data health and the model card
    of a run."""
    lines = []
    check = run.serving_check
    if check is not None:
        verdict = "passed" if check["blessed"] else f"refused ({check.get('problems', '')})"
        timing = ""
        if "latency_p50_ms" in check:
            timing = (
                f"; load {check['load_seconds']:.2f} s, single-image latency "
                f"p50 {check['latency_p50_ms']:.1f} ms, p99 {check['latency_p99_ms']:.1f} ms"
            )
        lines.append(f"serving check: {verdict}{timing}")
    evaluation = run.evaluation
    if evaluation is not None:
        from components.evaluation.class_metrics import shown

        lines.append(
            "eval per class (precision / recall / F1; - where undefined), "
            f"macro F1 {shown(evaluation['macro_f1'])}:"
        )
        lines += [
            f"  {row['class']:<20} {shown(row['precision'])} / {shown(row['recall'])} / "
            f"{shown(row['f1'])}  ({row['support']} images)"
            for row in evaluation["per_class"]
        ]
        pairs = ", ".join(
            f"{p['true']} -> {p['predicted']} ({p['count']})" for p in evaluation["most_confused"]
        )
        lines.append(f"most confused (true -> predicted): {pairs or 'none'}")
        lines.append(
            f"misclassified eval images: {evaluation['misclassified_count']}; report, "
            f"confusion_matrix.png and misclassified.csv in {evaluation['uri']}"
        )
    if run.tflite is not None:
        lines += _tflite_lines(run.tflite)
    health = run.data_health
    if health is not None:
        lines.append(
            f"data health: {health['near_duplicate_clusters']} near-duplicate cluster(s) "
            f"({health['near_duplicate_images']} images, {health['near_duplicate_fraction']:.1%}), "
            f"{health['odd_images']} odd image(s), {health['label_issues']} likely "
            f"mislabelled image(s) among {health['eval_images_checked']} eval images; "
            f"health.json in {health['uri']}"
        )
    if run.model_card is not None:
        lines.append(f"model card: {run.model_card}")
    return lines


def _tflite_lines(tflite: dict) -> list[str]:
    """Each TFLite model's points below the SavedModel on the eval split, size and single-image
    latency (p50), and why an int8 model was refused."""
    found = []
    for key, gap in sorted(tflite.items()):
        if not key.endswith("_accuracy_gap_points"):
            continue
        name = key.removesuffix("_accuracy_gap_points")
        figures = [f"{gap:+.2f} points"]
        if f"{name}_bytes" in tflite:
            figures.append(f"{tflite[f'{name}_bytes'] / 2**20:.2f} MiB")
        if f"{name}_latency_p50_ms" in tflite:
            figures.append(f"p50 {tflite[f'{name}_latency_p50_ms']:.2f} ms")
        found.append(f"{name} {', '.join(figures)}")
    models = "; ".join(found) or "no model converted (the model card says why)"
    lines = [f"TFLite against the SavedModel (accuracy gap, size, one-image latency): {models}"]
    if tflite.get("int8_refused"):
        lines.append(f"TFLite int8 refused: {tflite['int8_refused']}")
    return lines


def _settings(values: dict) -> str:
    return " ".join(f"{key}={value}" for key, value in sorted(values.items())) or "-"


def _dataset_rows(dataset: Dataset) -> list[tuple]:
    totals = dataset.totals
    span = "" if dataset.span is None else f" (span {dataset.span})"
    rows = [
        (dataset.examples.label, f"{dataset.examples.uri}{span}"),
        ("  splits", _settings(dataset.split_counts)),
        ("  label map", _settings(dataset.label_map)),
    ]
    if totals:
        rows.append(
            (
                "  ingest report",
                f"{totals.get('found')} files: {totals.get('accepted')} accepted, "
                f"{totals.get('rejected')} rejected{_reasons(dataset.rejected_per_reason)}, "
                f"{totals.get('ignored')} ignored"
                + (f" ({dataset.ingest_report.uri})" if dataset.ingest_report else ""),
            )
        )
    if dataset.example_gen is not None:
        where = (
            f" in {_runs(dataset.example_gen)}" if dataset.example_gen.runs else ", outside any run"
        )
        rows += [
            (dataset.example_gen.label, f"{dataset.example_gen.state}{where}"),
            ("  input", f"{dataset.input}, {totals.get('found', '?')} files"),
        ]
        if dataset.input_fingerprint:  # `imgpipe audit --data` ingests without one
            rows.append(("  input fingerprint", dataset.input_fingerprint))
    return rows


def _reasons(per_reason: dict) -> str:
    return f" ({_settings(per_reason)})" if per_reason else ""


def _runs(execution: ExecutionRecord) -> str:
    """The runs an execution belongs to, each named beside its id when it has a name."""
    named = [
        f'{run} "{execution.run_names[run]}"' if run in execution.run_names else run
        for run in execution.runs
    ]
    return f"run {named[0]}" if len(named) == 1 else f"runs {', '.join(named)}"


def format_model_lineage(lineage: ModelLineage) -> str:
    rows: list[tuple] = []
    if lineage.pushed_model is not None:
        properties = lineage.pushed_model.properties
        rows.append(
            (
                lineage.pushed_model.label,
                f"{properties.get('pushed_destination')} (version "
                f"{properties.get('pushed_version')}, {lineage.pushed_model.created})",
            )
        )
        rows.append((lineage.pusher.label, _runs(lineage.pusher)))
    if lineage.evaluation is not None:
        evaluation = lineage.evaluation
        baseline = (
            f"; baseline model {evaluation.baseline_model_id} (not followed)"
            if evaluation.baseline_model_id is not None
            else ""
        )
        rows.append(
            (
                evaluation.evaluator.label,
                f"accuracy {_accuracy(evaluation.accuracy)}, blessed "
                f"{_yes_no(evaluation.blessed)}{baseline}",
            )
        )
    rows += [
        (lineage.model.label, lineage.model.uri),
        ("  performance", _settings(lineage.model.properties) if lineage.model.properties else "-"),
        (
            lineage.trainer.label,
            f"{lineage.trainer.state}, {_seconds(lineage.trainer.seconds)}, "
            f"{_runs(lineage.trainer)}",
        ),
        (
            "  warm-started from",
            " <- ".join(model.label for model in lineage.warm_started_from) or "- (from scratch)",
        ),
        ("  code fingerprint", lineage.code_fingerprint or "-"),
        ("  trainer config", _settings(lineage.trainer_config)),
    ]
    if lineage.transform_graph is not None:
        rows.append((lineage.transform_graph.label, lineage.transform_graph.uri))
    if lineage.transform is not None:
        rows.append((lineage.transform.label, f"{lineage.transform.state}"))
    rows += _dataset_rows(lineage.dataset)
    return "\n".join(_table(rows))


def _model_rows(models: tuple[TrainedModel, ...]) -> list[str]:
    if not models:
        return ["no model was trained on these examples"]
    header = ("MODEL", "TRAINER", "RUNS", "BLESSED", "PUSHED TO")
    rows = [
        (
            trained.model.id,
            trained.trainer.label,
            ", ".join(trained.runs),
            _yes_no(trained.blessed),
            ", ".join(trained.pushed_to) or "no",
        )
        for trained in models
    ]
    return _table(rows, header)


def format_examples_lineage(lineage: ExamplesLineage) -> str:
    return "\n".join([*_table(_dataset_rows(lineage.dataset)), "", *_model_rows(lineage.models)])


def format_diff(diff: RunDiff) -> str:
    lines = [
        f"{side}: {run_id}" + (f' "{name}"' if name else "")
        for side, run_id, name in (("A", diff.run_a, diff.name_a), ("B", diff.run_b, diff.name_b))
    ]
    if not diff.changes:
        return "\n".join([*lines, f"no differences ({diff.unchanged} facts compared)"])
    rows = [(change.section, change.key, change.a, change.b) for change in diff.changes]
    return "\n".join(
        [
            *lines,
            *_table(rows, ("SECTION", "WHAT", "A", "B")),
            f"{len(diff.changes)} differences; {diff.unchanged} facts the same",
        ]
    )


def format_image_lineage(lineage: ImageLineage) -> str:
    lines = [f"image {lineage.query} (sha256 {lineage.sha256 or 'unreadable here'})"]
    if not lineage.matches:
        lines.append("no dataset in this metadata store includes it")
    for match in lineage.matches:
        span = "" if match.span is None else f", span {match.span}"
        lines.append(
            f"Examples {match.examples_id}{span}: {match.split} split, label {match.label}, "
            f"{match.shard}; matched by {match.match}"
        )
        lines += ["    " + line for line in _model_rows(match.models)]
    if lineage.unindexed_examples:
        ids = ", ".join(str(i) for i in lineage.unindexed_examples)
        lines.append(
            f"not searchable (ingested before source indexes were written): Examples {ids}"
        )
    return "\n".join(lines)


def _scored_answer(row: dict) -> str:
    """A row's answer in words: its top class and probability, or why it was not scored."""
    if row["status"] != "scored":
        return f"{row['status']}: {row['reason']}"
    low = ", low confidence" if row["low_confidence"] else ""
    return f"{row['top_class']} {row['probability']:.3f}{low}"


def _scored_by(model, version: str) -> str:
    if model is None:
        return "an unrecorded model"
    return f"{model.type} {model.id}" + (f" (version {version})" if version else "")


def _listed(kind: str, files: tuple[str, ...]) -> list[str]:
    """The files of one kind of change, MAX_LISTED of them, then how many more."""
    if not files:
        return []
    shown = [f"  {kind}: {file}" for file in files[:MAX_LISTED]]
    if len(files) > MAX_LISTED:
        shown.append(f"  ... and {len(files) - MAX_LISTED} more {kind}")
    return shown


def format_predictions_file_lineage(lineage: PredictionsFileLineage) -> str:
    """Which model wrote the file, and whether (and where) it changed since."""
    recorded = lineage.predictions
    counts = ", ".join(
        f"{recorded.properties.get(name, 0)} {name.replace('_', ' ')}"
        for name in metadata_keys.PREDICTIONS_COUNTS
    )
    version = recorded.properties.get(metadata_keys.MODEL_VERSION_PROPERTY, "")
    lines = [
        f"predictions file {lineage.path}: Predictions {recorded.id}, written "
        f"{recorded.created} by `imgpipe predict` with {_scored_by(lineage.model, version)}",
        counts,
    ]
    if lineage.unchanged:
        lines.append(f"unchanged since written (sha256 {lineage.sha256})")
        return "\n".join(lines)
    changes = len(lineage.edited) + len(lineage.added) + lineage.removed
    if lineage.unchanged is False:
        was = recorded.properties.get(metadata_keys.FILE_SHA256_PROPERTY)
        lines.append(f"changed since written (sha256 {lineage.sha256}, written {was})")
    if lineage.unreadable:
        lines.append(
            f"its rows cannot be compared: it no longer reads as predictions ({lineage.unreadable})"
        )
    elif not lineage.rows_compared:
        lines.append("its rows cannot be compared: the record holds no digests of them")
    elif changes or lineage.unchanged is None:
        lines.append(
            f"rows: {len(lineage.edited)} edited, {len(lineage.added)} added, "
            f"{lineage.removed} removed since written"
        )
        lines += _listed("edited", lineage.edited) + _listed("added", lineage.added)
    else:
        lines.append("every row as written (the file's bytes differ, not its predictions)")
    return "\n".join(lines)


def format_predictions_lineage(lineage: PredictionsLineage) -> str:
    lines = [f"image {lineage.query} (sha256 {lineage.sha256 or 'unreadable here'})"]
    if not lineage.scorings:
        lines.append("no recorded predictions include it")
    for scoring in lineage.scorings:
        scored_by = _scored_by(scoring.model, scoring.row["model_version"])
        lines.append(
            f"{scoring.predictions.created} {scored_by}: {_scored_answer(scoring.row)}; "
            f"Predictions {scoring.predictions.id} {scoring.predictions.uri}; "
            f"matched by {scoring.match}"
        )
    for record in lineage.unreadable:
        lines.append(f"not searchable (gone or unreadable): Predictions {record.id} {record.uri}")
    return "\n".join(lines)
