"""The pipeline's runs: one record per run (components, data, metrics, outcome), for the run
summary, `imgpipe runs` and the Airflow summary task alike."""

from __future__ import annotations

import dataclasses
import json

from ml_metadata.metadata_store import metadata_store
from ml_metadata.proto import metadata_store_pb2 as mlmd_pb2

from components import metadata_keys
from components.evaluation.evaluation_report_reader import (
    accuracy_on_test_split,
    read_report,
    small_eval_warning,
)
from components.ingest.ingest_report_reader import IngestReportRecord
from components.serving.model_card_reader import card_folder
from data_prep.contract.label_map import names_by_id
from data_prep.reading import file_access
from data_prep.writing.ingest_outputs import read_source_index
from pipeline import exit_codes
from pipeline.exit_codes import STOPPED_BY_EVALUATOR, STOPPED_BY_GATE, STOPPED_BY_SERVING_CHECK
from pipeline.lineage.eval_overlap import eval_overlap
from pipeline.lineage.metrics import eval_accuracy, validation_failures
from pipeline.lineage.models import examples_source_index
from pipeline.lineage.run_contexts import RunMembers, runs_in_store
from pipeline.lineage.store import (
    EXECUTION_RESULT_PROPERTY,
    OUTPUT_EVENTS,
    RESOLVER_EXECUTION_TYPE,
    STATES,
    ArtifactRecord,
    ExecutionRecord,
    LineageError,
    MetadataGraph,
    iso_time,
    plain_properties,
    plain_value,
    read_json,
)

GATE_NODE = "DataGate"
STOPPED = "stopped"  # the status of a run the data gate stopped


@dataclasses.dataclass(frozen=True)
class ComponentRun:
    node: str
    state: str
    seconds: float
    execution_id: int


@dataclasses.dataclass(frozen=True)
class PipelineRun:
    run_id: str
    pipeline: str
    started: str
    seconds: float
    status: str  # complete, failed, interrupted, running, stopped (by the data gate)
    components: tuple[ComponentRun, ...]
    eval_accuracy: float | None = None  # None when no evaluation belongs to the run
    # The held-out test split's accuracy (the readable evaluation's), None without a test split;
    # shown only: blessing is decided on the eval split.
    test_accuracy: float | None = None
    blessed: bool | None = None
    pushed_to: str | None = None  # the pushed model's folder; None when nothing was pushed
    pushed_model_id: int | None = None
    model_id: int | None = None
    examples_id: int | None = None
    span: int | None = None  # the data span the run used
    new_data: bool | None = None  # True when this run ingested it (ImageExampleGen not cached)
    class_names: tuple[str, ...] = ()  # by label id, from the ingest's label map
    classes_left_out: tuple[str, ...] = ()  # class folders with no accepted image
    # Files found, accepted, rejected and ignored by the ingest, the rejected ones by reason, and
    # its report's path.
    ingest_counts: dict[str, int] = dataclasses.field(default_factory=dict)
    rejected_per_reason: dict[str, int] = dataclasses.field(default_factory=dict)
    ingest_report: str | None = None
    # ServingCheck: blessed, load_seconds, latency_p50_ms, latency_p99_ms, problems (if refused).
    serving_check: dict | None = None
    # EvaluationReportGen: accuracy, macro_f1, per_class (precision, recall, F1 and support of
    # each class, None where undefined), most_confused, misclassified_count, uri.
    evaluation: dict | None = None
    # Set when the eval split is too small to trust its metrics: why (evaluation_report_reader).
    eval_warning: str | None = None
    # TFLiteExport: saved_model_accuracy and <float32|float16>_accuracy_gap_points.
    tflite: dict | None = None
    model_card: str | None = None  # folder holding model_card.json/.md (the pushed model's)
    # DataHealthGen: metadata_keys.DATA_HEALTH_COUNTS, near_duplicate_fraction and its uri.
    data_health: dict | None = None
    # The Trainer's performance report (images/s, step time, ...) from the Model's properties.
    training_performance: dict | None = None
    # How the training went, from the Model's properties: metadata_keys.TRAINING_OUTCOME (its
    # epochs, the exported one, why it stopped) and warm_started_from_model_id when it was.
    training_outcome: dict | None = None
    # Why nothing was pushed, in one place: which stage stopped it (one of exit_codes.STOPPED_BY_*,
    # or the failed component's node id) and its own words (the gate's anomalies, drift or class
    # change; the TFMA thresholds that failed; the serving check's problems).
    stopped_by: str | None = None
    not_pushed_reason: str | None = None
    # Set when the Evaluator compared with no baseline although one was blessed: why.
    baseline_skipped: str | None = None
    # The eval images the Evaluator compared the candidate and its baseline on, against the
    # baseline's own eval set (pipeline/lineage/eval_overlap.py: compared, kept, gone,
    # trained_on); None without a baseline model.
    eval_overlap: dict | None = None
    # The image size and brightness distances a passing data gate measured
    # (metadata_keys.DRIFT_DISTANCES_PROPERTY: feature, distance, threshold, images,
    # baseline_images, floor, passed; drift_record.Distance.record); empty
    # without a baseline or a passing gate.
    gate_distances: tuple[dict, ...] = ()
    # The classes the gate measured them on (metadata_keys.DRIFT_CLASSES_PROPERTY: shared, new,
    # gone, whole_split); None without a baseline or in a record made before it was kept.
    gate_classes: dict | None = None
    name: str | None = None  # the name or note the run was given (imgpipe run --run-name)

    @property
    def status_words(self) -> str:
        """The status as the console and the UI say it."""
        return f"stopped by the {self.stopped_by}" if self.status == STOPPED else self.status

    @property
    def exit_code(self) -> int:
        """The `imgpipe run` exit status of this run."""
        return exit_codes.of_run(bool(self.pushed_to), self.stopped_by, self.status == "failed")


def _outputs_by_key(events: list[mlmd_pb2.Event]) -> dict[int, dict[str, list[int]]]:
    """execution id -> output key -> artifact ids."""
    found: dict[int, dict[str, list[int]]] = {}
    for event in events:
        if event.type in OUTPUT_EVENTS:
            key = next((s.key for s in event.path.steps if s.HasField("key")), "")
            found.setdefault(event.execution_id, {}).setdefault(key, []).append(event.artifact_id)
    return found


# The outputs a run summary reads: name -> (output key, the artifact type it must have); the
# type tells the Evaluator's ModelBlessing from the ServingCheck's InfraBlessing (both 'blessing').
_RUN_OUTPUTS = {
    "examples": ("examples", "Examples"),
    "model": ("model", "Model"),
    "blessing": ("blessing", "ModelBlessing"),
    "serving_check": ("blessing", "InfraBlessing"),
    "evaluation": ("evaluation", "ModelEvaluation"),
    "pushed_model": ("pushed_model", "PushedModel"),
    "ingest_report": (metadata_keys.INGEST_REPORT_OUTPUT_KEY, metadata_keys.INGEST_REPORT_TYPE),
    "tflite": ("tflite", metadata_keys.TFLITE_MODEL_TYPE),
    "readable_evaluation": ("report", metadata_keys.EVALUATION_REPORT_TYPE),
    "model_card": (metadata_keys.MODEL_CARD_OUTPUT_KEY, metadata_keys.MODEL_CARD_TYPE),
    "model_run": ("model_run", "ModelRun"),  # the Trainer's TensorBoard logs and JSON reports
    "verdict": (metadata_keys.DATA_VERDICT_OUTPUT_KEY, metadata_keys.DATA_VERDICT_TYPE),
    "data_health": (metadata_keys.DATA_HEALTH_OUTPUT_KEY, metadata_keys.DATA_HEALTH_TYPE),
}


def _status(states: list[str], recorded: str | None) -> str:
    """From the executions' states and the state the local runner recorded on the run (None for
    runs of other runners): a run killed between two components is failed, not complete; an
    interrupted one is interrupted even when a component failed of the interrupt (Beam raises
    its own error in place of a KeyboardInterrupt)."""
    if recorded == metadata_keys.STATE_INTERRUPTED:
        return "interrupted"
    if "failed" in states or recorded == metadata_keys.STATE_FAILED:
        return "failed"
    if "canceled" in states:
        return "interrupted"
    if {"running", "new"} & set(states) or recorded == metadata_keys.STATE_RUNNING:
        return "running"
    return "complete"


def list_runs(
    store: metadata_store.MetadataStore,
    pipeline: str | None = None,
    metrics: bool = True,
    limit: int | None = None,
) -> list[PipelineRun]:
    """Pipeline runs (of one pipeline, when named), newest first; at most `limit` of them.
    metrics=False leaves eval_accuracy unread (reading it loads TFMA)."""
    graph = MetadataGraph(store)
    runs = []
    for members in runs_in_store(graph):
        if not members.executions or pipeline not in (None, members.pipeline):
            continue
        runs.append(_summarize(graph, members, metrics))
        if limit is not None and len(runs) == limit:
            break
    if not runs:
        where = f"of pipeline {pipeline!r} " if pipeline else ""
        raise LineageError(f"no runs {where}in this metadata store")
    return runs


def run_record(store: metadata_store.MetadataStore, pipeline: str, run_id: str) -> PipelineRun:
    """One run's record by its run id (an Airflow run id, or a local run's timestamp id)."""
    graph = MetadataGraph(store)
    for members in runs_in_store(graph):
        if members.pipeline == pipeline and members.run_id == run_id and members.executions:
            return _summarize(graph, members, metrics=True)
    raise LineageError(f"no run {run_id!r} of pipeline {pipeline!r} in this metadata store")


def _summarize(graph: MetadataGraph, members: RunMembers, metrics: bool) -> PipelineRun:
    executions, node_of = members.executions, members.node_of
    components = tuple(
        ComponentRun(
            node_of.get(e.id, ("", "?"))[1],
            STATES.get(e.last_known_state, "unknown"),
            (e.last_update_time_since_epoch - e.create_time_since_epoch) / 1000,
            e.id,
        )
        for e in executions
    )
    outputs = _made_outputs(graph, executions)
    first = _first_outputs(graph, outputs)
    outcome = {}
    if "blessing" in first:
        blessing = graph.artifact(first["blessing"])
        if metadata_keys.BLESSED_PROPERTY in blessing.custom_properties:
            outcome["blessed"] = bool(
                blessing.custom_properties[metadata_keys.BLESSED_PROPERTY].int_value
            )
    if "evaluation" in first and metrics:
        evaluation_uri = graph.artifact(first["evaluation"]).uri
        outcome["eval_accuracy"] = eval_accuracy(evaluation_uri)
        outcome["eval_overlap"] = _eval_overlap(graph, first["evaluation"])
    outcome.update(_data(graph, first, components, outputs))
    if "pushed_model" in first:
        pushed = graph.artifact(first["pushed_model"])
        if pushed.custom_properties[metadata_keys.PUSHED_PROPERTY].int_value:
            outcome["pushed_to"] = pushed.custom_properties[
                metadata_keys.PUSHED_DESTINATION_PROPERTY
            ].string_value
            outcome["pushed_model_id"] = pushed.id
    outcome.update(_model_reports(graph, first, outcome.get("pushed_to")))
    outcome.update(
        _why_not_pushed(graph, executions, components, first, outcome, metrics, members.ended_by)
    )
    started = min(e.create_time_since_epoch for e in executions)
    ended = max(e.last_update_time_since_epoch for e in executions)
    return PipelineRun(
        run_id=members.run_id,
        pipeline=members.pipeline,
        started=iso_time(started),
        seconds=(ended - started) / 1000,
        # A gate stop is a decision the gate was made for, not a failure.
        status=STOPPED
        if outcome.get("stopped_by") == STOPPED_BY_GATE
        else _status([c.state for c in components], members.recorded),
        components=components,
        model_id=first.get("model"),
        examples_id=first.get("examples"),
        name=members.name,
        **outcome,
    )


def _why_not_pushed(
    graph: MetadataGraph, executions, components, first, outcome, metrics, ended_by
) -> dict:
    """stopped_by, not_pushed_reason, baseline_skipped, gate_distances and gate_classes of a run
    (see PipelineRun). A failed component's reason is the message TFX recorded on its execution,
    else the one the local runner recorded on the run (the exception's own words: ended_by)."""
    found = {}
    if "verdict" in first:
        properties = graph.artifact(first["verdict"]).custom_properties
        distances = properties.get(metadata_keys.DRIFT_DISTANCES_PROPERTY)
        if distances is not None and distances.string_value:
            found["gate_distances"] = tuple(json.loads(distances.string_value))
        classes = properties.get(metadata_keys.DRIFT_CLASSES_PROPERTY)
        if classes is not None and classes.string_value:
            found["gate_classes"] = json.loads(classes.string_value)
        verdict = properties.get(metadata_keys.CLASS_CHANGE_PROPERTY)
        if verdict is not None and verdict.string_value:
            found["baseline_skipped"] = (
                f"the class set changed ({verdict.string_value}) and gate.allow_class_changes "
                "is on: a baseline with another label map is never compared against"
            )
    if outcome.get("pushed_to"):
        return found
    failed = [
        (execution, component)
        for execution, component in zip(executions, components, strict=True)
        if component.state == "failed"
    ]
    if failed:
        execution, component = failed[0]
        result = execution.custom_properties.get(EXECUTION_RESULT_PROPERTY)
        message = json.loads(result.string_value).get("resultMessage") if result else None
        stage = STOPPED_BY_GATE if component.node == GATE_NODE else component.node
        found.update(
            stopped_by=stage,
            not_pushed_reason=message
            or ended_by
            or f"{component.node} failed; the run log has the cause",
        )
    elif outcome.get("blessed") is False:
        reason = "the Evaluator did not bless the model"
        if "evaluation" in first and metrics:
            reason = validation_failures(graph.artifact(first["evaluation"]).uri) or reason
        found.update(stopped_by=STOPPED_BY_EVALUATOR, not_pushed_reason=reason)
    elif (outcome.get("serving_check") or {}).get("blessed") is False:
        problems = outcome["serving_check"].get("problems") or "the serving check refused it"
        found.update(stopped_by=STOPPED_BY_SERVING_CHECK, not_pushed_reason=str(problems))
    elif ended_by:  # ended between components: killed, interrupted, or failed outside them
        found.update(not_pushed_reason=ended_by)
    return found


def _made_outputs(
    graph: MetadataGraph, executions: list[mlmd_pb2.Execution]
) -> dict[int, dict[str, list[int]]]:
    """execution id -> output key -> artifact ids, of the executions that made (or reused from
    the cache) what they output; resolvers only point at older artifacts."""
    makers = [
        e.id for e in executions if graph.execution_types[e.type_id] != RESOLVER_EXECUTION_TYPE
    ]
    return _outputs_by_key(graph.store.get_events_by_execution_ids(makers))


def _first_outputs(
    graph: MetadataGraph, outputs: dict[int, dict[str, list[int]]]
) -> dict[str, int]:
    """_RUN_OUTPUTS name -> the id of the run's first live artifact of that name and type."""
    # Live ones, and those found deleted or damaged since (serving_folder.py,
    # damaged_examples.py): what the run made. A failed execution leaves pending outputs behind.
    produced = {
        artifact.id: graph.artifact_types[artifact.type_id]
        for artifact in graph.store.get_artifacts_by_id(
            [i for by_key in outputs.values() for ids in by_key.values() for i in ids]
        )
        if artifact.state in (mlmd_pb2.Artifact.LIVE, mlmd_pb2.Artifact.DELETED)
    }
    first: dict[str, int] = {}  # e.g. 'blessing' -> the ModelBlessing, not the InfraBlessing
    for execution_id in sorted(outputs):
        for key, ids in outputs[execution_id].items():
            for name, (output_key, type_name) in _RUN_OUTPUTS.items():
                if key == output_key and produced.get(ids[0]) == type_name:
                    first.setdefault(name, ids[0])
    return first


def run_artifacts(
    store: metadata_store.MetadataStore, run: PipelineRun
) -> dict[str, ArtifactRecord]:
    """The artifacts behind a run's summary by _RUN_OUTPUTS name (examples, model_run,
    readable_evaluation, tflite, model_card, ...), made or reused from the cache by the run, for
    views that read their files."""
    graph = MetadataGraph(store)
    executions = store.get_executions_by_id([c.execution_id for c in run.components])
    first = _first_outputs(graph, _made_outputs(graph, executions))
    return {name: graph.record(graph.artifact(artifact_id)) for name, artifact_id in first.items()}


def run_executions(store: metadata_store.MetadataStore, run: PipelineRun) -> list[ExecutionRecord]:
    """The run's executions as records (start time, seconds, state, settings), in run order."""
    graph = MetadataGraph(store)
    executions = store.get_executions_by_id([c.execution_id for c in run.components])
    return [graph.execution(e) for e in sorted(executions, key=lambda e: e.id)]


def _data(graph: MetadataGraph, first: dict[str, int], components, outputs) -> dict:
    """The span the run used, whether it ingested it, and the ingest's accounting."""
    data = {}
    if "examples" in first:
        data["span"] = graph.artifact(first["examples"]).properties["span"].int_value
        producers = {
            e for e, by_key in outputs.items() if first["examples"] in by_key.get("examples", [])
        }
        data["new_data"] = any(c.state == "ran" for c in components if c.execution_id in producers)
    if "ingest_report" in first:
        report = IngestReportRecord.read(graph.artifact(first["ingest_report"]))
        data["class_names"] = tuple(names_by_id(report.label_map))
        if report.classes_left_out:
            data["classes_left_out"] = report.classes_left_out
        data["ingest_counts"] = report.counts
        data["ingest_report"] = report.report_path
        if report.counts.get("rejected"):  # the reasons are in the report file only
            data["rejected_per_reason"] = read_json(report.report_path).get(
                "rejected_per_reason", {}
            )
    return data


def _eval_overlap(graph: MetadataGraph, evaluation_id: int) -> dict | None:
    """What the Evaluator's no-regression comparison was made on, from the source indexes of
    its examples and of its baseline model's training examples; None without a baseline or
    where an index is missing."""
    evaluator = graph.producer(evaluation_id, "evaluation")
    baselines = graph.inputs(evaluator.id, "baseline_model") if evaluator else []
    trainer = graph.producer(baselines[0].id, "model") if baselines else None
    if trainer is None:
        return None
    examples = graph.inputs(evaluator.id, "examples") + graph.inputs(trainer.id, "examples")
    paths = [examples_source_index(graph.store, e.id) for e in examples]
    if len(paths) != 2 or not all(path and file_access.exists(path) for path in paths):
        return None
    return dataclasses.asdict(eval_overlap(*(read_source_index(path) for path in paths)))


def _model_reports(graph: MetadataGraph, first: dict[str, int], pushed_to: str | None) -> dict:
    """The training performance report, serving check, TFLite comparison, readable evaluation,
    model card (beside the model when the run pushed it) and data health of a run."""
    reports = {}
    if "model" in first:
        model = graph.artifact(first["model"])
        performance = {
            name.removeprefix(metadata_keys.PERFORMANCE_PROPERTY_PREFIX): plain_value(value)
            for name, value in model.custom_properties.items()
            if name.startswith(metadata_keys.PERFORMANCE_PROPERTY_PREFIX)
        }
        reports["training_performance"] = performance or None
        reports["training_outcome"] = _training_outcome(model)
    if "serving_check" in first:
        check = plain_properties(graph.artifact(first["serving_check"]))
        reports["serving_check"] = {**check, "blessed": bool(check.get("blessed"))}
    if "tflite" in first:
        reports["tflite"] = plain_properties(graph.artifact(first["tflite"]))
    if "readable_evaluation" in first:
        uri = graph.artifact(first["readable_evaluation"]).uri
        report = read_report(uri)
        if report is not None:
            keys = ("accuracy", "macro_f1", "per_class", "most_confused", "misclassified_count")
            reports["evaluation"] = {**{key: report[key] for key in keys}, "uri": uri}
            reports["eval_warning"] = small_eval_warning(report)
            reports["test_accuracy"] = accuracy_on_test_split(report)
    if "model_card" in first:
        reports["model_card"] = card_folder(graph.artifact(first["model_card"]), pushed_to)
    if "data_health" in first:
        health = graph.artifact(first["data_health"])
        reports["data_health"] = {**plain_properties(health), "uri": health.uri}
    return reports


def _training_outcome(model: mlmd_pb2.Artifact) -> dict | None:
    prefix = metadata_keys.TRAINING_PROPERTY_PREFIX
    outcome = {
        name.removeprefix(prefix): plain_value(value)
        for name, value in model.custom_properties.items()
        if name.startswith(prefix)
    }
    warm = model.custom_properties.get(metadata_keys.WARM_STARTED_FROM_PROPERTY)
    if warm is not None:
        outcome[metadata_keys.WARM_STARTED_FROM_PROPERTY] = warm.int_value
    return outcome or None


def find_run(runs: list[PipelineRun], spec: str) -> PipelineRun:
    """A run by id, unique id prefix, `latest` or `latest~N` (N runs before the latest)."""
    if spec == "latest" or spec.startswith("latest~"):
        back = spec.partition("~")[2] or "0"
        if not back.isdigit():
            raise LineageError(f"{spec!r}: write latest~N with a whole number N")
        if int(back) >= len(runs):
            raise LineageError(f"{spec!r}: only {len(runs)} run(s) in this metadata store")
        return runs[int(back)]
    found = [run for run in runs if run.run_id == spec] or [
        run for run in runs if run.run_id.startswith(spec)
    ]
    if len(found) == 1:
        return found[0]
    if not found:
        raise LineageError(f"no run {spec!r}; `imgpipe runs` lists the run ids")
    raise LineageError(f"{spec!r} matches {len(found)} runs; give more of the run id")
