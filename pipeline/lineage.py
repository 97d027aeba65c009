"""Answers from ML Metadata: the pipeline's runs, where a model came from, what was made from a
dataset, what changed between two runs, and which datasets and models included an image.

Walks follow named event keys (the components' input and output names: 'pushed_model', 'model',
'transform_graph', 'examples', ...) instead of every edge: a blind upstream walk from a pushed model
also crosses the Evaluator's 'baseline_model' into older models and their datasets. Results are
plain dataclasses (JSON via dataclasses.asdict); lineage_format.py turns them into tables.
Only ml_metadata is imported up front; TFMA (for metrics) and Beam (for files) load when needed.
"""

from __future__ import annotations

import dataclasses
import datetime
import functools
import hashlib
import json
import logging
import os

from google.protobuf import json_format
from ml_metadata.metadata_store import metadata_store
from ml_metadata.proto import metadata_store_pb2 as mlmd_pb2

HEADLINE_METRIC = "sparse_categorical_accuracy"
PER_CLASS_METRICS = ("precision", "recall")
_INPUT_EVENTS = (mlmd_pb2.Event.INPUT, mlmd_pb2.Event.DECLARED_INPUT)
_OUTPUT_EVENTS = (mlmd_pb2.Event.OUTPUT, mlmd_pb2.Event.DECLARED_OUTPUT)
_STATES = {
    mlmd_pb2.Execution.NEW: "new",
    mlmd_pb2.Execution.RUNNING: "running",
    mlmd_pb2.Execution.COMPLETE: "ran",
    mlmd_pb2.Execution.FAILED: "failed",
    mlmd_pb2.Execution.CACHED: "cached",
    mlmd_pb2.Execution.CANCELED: "canceled",
}
# Properties TFX puts on every artifact and execution; they answer nothing.
_BOOKKEEPING = frozenset({"tfx_version", "is_external", "state", "name", "producer_component"})


class LineageError(LookupError):
    """The store cannot answer: unknown id, an artifact of another type, or no runs at all."""


@dataclasses.dataclass(frozen=True)
class ArtifactRecord:
    id: int
    type: str
    uri: str
    created: str  # ISO time, UTC
    properties: dict  # properties and custom properties, as plain values

    @property
    def label(self) -> str:
        return f"{self.type} {self.id}"


@dataclasses.dataclass(frozen=True)
class ExecutionRecord:
    id: int
    component: str  # the pipeline's node id, e.g. Trainer
    state: str  # ran, cached, failed, running, ...
    started: str
    seconds: float
    runs: tuple[str, ...]  # the pipeline runs it belongs to
    properties: dict  # exec properties (JSON strings parsed)

    @property
    def label(self) -> str:
        return f"{self.component} #{self.id}"


@dataclasses.dataclass(frozen=True)
class Edge:
    """One followed event: source -> target, named by the component's input or output key."""

    source: str
    target: str
    key: str


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
    status: str  # complete, failed, running
    components: tuple[ComponentRun, ...]
    eval_accuracy: float | None = None  # None when no evaluation belongs to the run
    blessed: bool | None = None
    pushed_to: str | None = None  # the pushed model's folder; None when nothing was pushed
    pushed_model_id: int | None = None
    model_id: int | None = None
    examples_id: int | None = None
    span: int | None = None  # the data span the run used
    new_data: bool | None = None  # True when this run ingested it (ImageExampleGen not cached)
    class_names: tuple[str, ...] = ()  # by label id, from the ingest's label map
    # Files found, accepted, rejected and ignored by the ingest, and its report's path.
    ingest_counts: dict[str, int] = dataclasses.field(default_factory=dict)
    ingest_report: str | None = None
    # Eval precision and recall of each class, by label id (read with the accuracy).
    per_class: dict[int, dict[str, float]] = dataclasses.field(default_factory=dict)
    # ServingCheck: blessed, load_seconds, latency_p50_ms, latency_p99_ms, problems (if refused).
    serving_check: dict | None = None
    # EvaluationReportGen: accuracy, macro_f1, per_class, most_confused, misclassified_count, uri.
    evaluation: dict | None = None
    # TFLiteExport: saved_model_accuracy and <float32|float16>_accuracy_gap_points.
    tflite: dict | None = None
    model_card: str | None = None  # folder holding model_card.json/.md (the pushed model's)
    # The Trainer's performance report (images/s, step time, ...) from the Model's properties.
    training_performance: dict | None = None


@dataclasses.dataclass(frozen=True)
class Dataset:
    """An Examples artifact with what ImageExampleGen recorded about it."""

    examples: ArtifactRecord
    span: int | None
    split_counts: dict
    label_map: dict
    totals: dict  # found, accepted, rejected, ignored
    rejected_per_reason: dict
    ingest_report: ArtifactRecord | None
    example_gen: ExecutionRecord | None
    input: str | None
    input_fingerprint: str | None


@dataclasses.dataclass(frozen=True)
class Evaluation:
    evaluator: ExecutionRecord
    blessed: bool | None
    accuracy: float | None
    baseline_model_id: int | None  # named, not followed


@dataclasses.dataclass(frozen=True)
class ModelLineage:
    pushed_model: ArtifactRecord | None
    pusher: ExecutionRecord | None
    model: ArtifactRecord
    trainer: ExecutionRecord
    trainer_config: dict
    code_fingerprint: str | None
    evaluation: Evaluation | None
    transform_graph: ArtifactRecord | None
    transform: ExecutionRecord | None
    dataset: Dataset
    edges: tuple[Edge, ...]
    # The models it was warm-started from, nearest first (its Trainer's base_model, that model's
    # Trainer's base_model, ...); empty when it was trained from scratch.
    warm_started_from: tuple[ArtifactRecord, ...] = ()


@dataclasses.dataclass(frozen=True)
class TrainedModel:
    model: ArtifactRecord
    trainer: ExecutionRecord
    runs: tuple[str, ...]  # every run that produced or reused it
    blessed: bool | None
    pushed_to: tuple[str, ...]


@dataclasses.dataclass(frozen=True)
class ExamplesLineage:
    dataset: Dataset
    models: tuple[TrainedModel, ...]


@dataclasses.dataclass(frozen=True)
class Change:
    section: str  # config, code, data, metrics, outcome, artifacts, components
    key: str
    a: object
    b: object


@dataclasses.dataclass(frozen=True)
class RunDiff:
    run_a: str
    run_b: str
    changes: tuple[Change, ...]
    unchanged: int


@dataclasses.dataclass(frozen=True)
class ImageMatch:
    examples_id: int
    span: int | None
    match: str  # e.g. "path and bytes", "path only (the file changed since)", "bytes only ..."
    path: str  # as recorded in the dataset
    sha256: str
    split: str
    label: str
    shard: str
    models: tuple[TrainedModel, ...]


@dataclasses.dataclass(frozen=True)
class ImageLineage:
    query: str
    sha256: str | None  # of the file now; None when it cannot be read
    matches: tuple[ImageMatch, ...]
    unindexed_examples: tuple[int, ...]  # datasets ingested before source indexes existed


def _iso(millis: int) -> str:
    return datetime.datetime.fromtimestamp(millis / 1000, datetime.timezone.utc).isoformat(
        timespec="seconds"
    )


def _plain(value: mlmd_pb2.Value):
    kind = value.WhichOneof("value")
    if kind == "struct_value":
        found = json_format.MessageToDict(value.struct_value)
        return json.loads(found["__value__"]) if set(found) == {"__value__"} else found
    if kind == "proto_value":
        return str(value.proto_value.type_url)
    return getattr(value, kind) if kind else None


def _parsed(value):
    """Exec properties hold JSON text (configs); parse it so settings can be compared."""
    if isinstance(value, str) and value[:1] in "{[":
        try:
            return json.loads(value)
        except json.JSONDecodeError:
            return value
    return value


def _properties(node, parse_json: bool = False) -> dict:
    values = {}
    for mapping in (node.properties, node.custom_properties):
        for key, value in mapping.items():
            if key not in _BOOKKEEPING and not key.startswith("__"):
                plain = _plain(value)
                values[key] = _parsed(plain) if parse_json else plain
    return dict(sorted(values.items()))


def _has_key(event: mlmd_pb2.Event, key: str) -> bool:
    """As tfx's event_lib.contains_key: an artifact given under two keys (a model that is also
    its own baseline) has both in one event path."""
    return any(step.HasField("key") and step.key == key for step in event.path.steps)


class _Graph:
    """The store with the few typed hops lineage needs, and caches for one question."""

    def __init__(self, store: metadata_store.MetadataStore):
        self.store = store
        self.artifact_types = {t.id: t.name for t in store.get_artifact_types()}
        self.context_types = {t.name: t.id for t in store.get_context_types()}
        self._cache: dict = {}

    def artifact(self, artifact_id: int, expected: tuple[str, ...] = ()) -> mlmd_pb2.Artifact:
        found = self.store.get_artifacts_by_id([artifact_id])
        if not found:
            raise LineageError(f"no artifact with id {artifact_id} in this metadata store")
        kind = self.artifact_types[found[0].type_id]
        if expected and kind not in expected:
            raise LineageError(
                f"artifact {artifact_id} is an artifact of type {kind}, not {' or '.join(expected)}"
            )
        return found[0]

    def artifacts_of_type(self, name: str) -> list[mlmd_pb2.Artifact]:
        if name not in self.artifact_types.values():
            return []
        return sorted(self.store.get_artifacts_by_type(name), key=lambda a: a.id)

    def events_of_execution(self, execution_id: int) -> list[mlmd_pb2.Event]:
        key = ("execution_events", execution_id)
        if key not in self._cache:
            self._cache[key] = self.store.get_events_by_execution_ids([execution_id])
        return self._cache[key]

    def producer(self, artifact_id: int, key: str) -> mlmd_pb2.Execution | None:
        """The execution that made the artifact (not a later one that reused it from the cache)."""
        ids = [
            event.execution_id
            for event in self.store.get_events_by_artifact_ids([artifact_id])
            if event.type in _OUTPUT_EVENTS and _has_key(event, key)
        ]
        if not ids:
            return None
        executions = sorted(self.store.get_executions_by_id(ids), key=lambda e: e.id)
        made = [e for e in executions if e.last_known_state != mlmd_pb2.Execution.CACHED]
        return (made or executions)[0]

    def consumers(self, artifact_id: int, key: str) -> list[mlmd_pb2.Execution]:
        ids = [
            event.execution_id
            for event in self.store.get_events_by_artifact_ids([artifact_id])
            if event.type in _INPUT_EVENTS and _has_key(event, key)
        ]
        return sorted(self.store.get_executions_by_id(ids), key=lambda e: e.id) if ids else []

    def _linked(self, execution_id: int, key: str, types) -> list[mlmd_pb2.Artifact]:
        ids = [
            event.artifact_id
            for event in self.events_of_execution(execution_id)
            if event.type in types and _has_key(event, key)
        ]
        return sorted(self.store.get_artifacts_by_id(ids), key=lambda a: a.id) if ids else []

    def inputs(self, execution_id: int, key: str) -> list[mlmd_pb2.Artifact]:
        return self._linked(execution_id, key, _INPUT_EVENTS)

    def outputs(self, execution_id: int, key: str) -> list[mlmd_pb2.Artifact]:
        return self._linked(execution_id, key, _OUTPUT_EVENTS)

    def record(self, artifact: mlmd_pb2.Artifact) -> ArtifactRecord:
        return ArtifactRecord(
            artifact.id,
            self.artifact_types[artifact.type_id],
            artifact.uri,
            _iso(artifact.create_time_since_epoch),
            _properties(artifact),
        )

    def execution(self, execution: mlmd_pb2.Execution) -> ExecutionRecord:
        contexts = self.store.get_contexts_by_execution(execution.id)
        node = next((c.name for c in contexts if c.type_id == self.context_types.get("node")), "?")
        runs = tuple(
            sorted(c.name for c in contexts if c.type_id == self.context_types.get("pipeline_run"))
        )
        elapsed = execution.last_update_time_since_epoch - execution.create_time_since_epoch
        return ExecutionRecord(
            execution.id,
            node.split(".", 1)[-1],
            _STATES.get(execution.last_known_state, "unknown"),
            _iso(execution.create_time_since_epoch),
            elapsed / 1000,
            runs,
            _properties(execution, parse_json=True),
        )


@functools.lru_cache(maxsize=64)
def eval_accuracy(evaluation_uri: str) -> float | None:
    """The candidate model's accuracy on the overall slice of a ModelEvaluation artifact (not
    the baseline's, not a per-slice value, not a diff), read with TFMA's own reader."""
    import tensorflow_model_analysis as tfma

    tf_logger = logging.getLogger("tensorflow")
    level = tf_logger.level
    tf_logger.setLevel(logging.ERROR)  # TFMA's reader trips a TensorFlow deprecation notice
    try:
        for metrics in tfma.load_metrics(evaluation_uri):
            if metrics.slice_key.single_slice_keys:
                continue
            for entry in metrics.metric_keys_and_values:
                key = entry.key
                if (
                    key.name == HEADLINE_METRIC
                    and key.model_name != "baseline"
                    and not key.is_diff
                    and entry.value.HasField("double_value")
                ):
                    return entry.value.double_value.value
    finally:
        tf_logger.setLevel(level)
    return None


@functools.lru_cache(maxsize=64)
def per_class_metrics(evaluation_uri: str) -> dict[int, dict[str, float]]:
    """The candidate's precision and recall of each class (TFMA metrics binarized by class id)
    on the overall slice; NaN where undefined (a class never predicted has no precision)."""
    import tensorflow_model_analysis as tfma

    per_class: dict[int, dict[str, float]] = {}
    for metrics in tfma.load_metrics(evaluation_uri):
        if metrics.slice_key.single_slice_keys:
            continue
        for entry in metrics.metric_keys_and_values:
            key = entry.key
            if (
                key.name in PER_CLASS_METRICS
                and key.sub_key.HasField("class_id")
                and key.model_name != "baseline"
                and not key.is_diff
            ):
                values = per_class.setdefault(key.sub_key.class_id.value, {})
                values[key.name] = entry.value.double_value.value
    return {class_id: dict(sorted(per_class[class_id].items())) for class_id in sorted(per_class)}


# --- Runs ---------------------------------------------------------------------------------


def _run_executions(graph: _Graph) -> tuple[dict, dict]:
    """Pipeline-run contexts by id, and each execution's (pipeline, node) from node contexts."""
    node_of = {}
    for node in graph.store.get_contexts_by_type("node"):
        pipeline_name, _, node_id = node.name.partition(".")
        for execution in graph.store.get_executions_by_context(node.id):
            node_of[execution.id] = (pipeline_name, node_id)
    return {c.id: c for c in graph.store.get_contexts_by_type("pipeline_run")}, node_of


def _outputs_by_key(events: list[mlmd_pb2.Event]) -> dict[int, dict[str, list[int]]]:
    """execution id -> output key -> artifact ids."""
    found: dict[int, dict[str, list[int]]] = {}
    for event in events:
        if event.type in _OUTPUT_EVENTS:
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
    # imgpipe's own artifact types, defined in components/ (not imported: TFX loads slowly).
    "ingest_report": ("ingest_report", "imgpipe.IngestReport"),
    "tflite": ("tflite", "imgpipe.TFLiteModel"),
    "readable_evaluation": ("report", "imgpipe.EvaluationReport"),
    "model_card": ("model_card", "imgpipe.ModelCard"),
}
INGEST_COUNTS = ("found", "accepted", "rejected", "ignored")  # IngestReport custom properties


def _status(states: list[str]) -> str:
    if "failed" in states:
        return "failed"
    if {"running", "new"} & set(states):
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
    graph = _Graph(store)
    contexts, node_of = _run_executions(graph)
    runs = []
    for context in sorted(
        contexts.values(), key=lambda c: (c.create_time_since_epoch, c.id), reverse=True
    ):
        executions = sorted(store.get_executions_by_context(context.id), key=lambda e: e.id)
        names = {node_of[e.id][0] for e in executions if e.id in node_of}
        if not executions or (pipeline is not None and pipeline not in names):
            continue
        runs.append(_summarize(graph, context.name, executions, node_of, metrics))
        if limit is not None and len(runs) == limit:
            break
    if not runs:
        where = f"of pipeline {pipeline!r} " if pipeline else ""
        raise LineageError(f"no runs {where}in this metadata store")
    return runs


def summarize_executions(
    store: metadata_store.MetadataStore,
    run_id: str,
    pipeline: str,
    executions: list[mlmd_pb2.Execution],
    nodes: list[str],
) -> PipelineRun:
    """One run's record from its executions (in execution order) and their node ids, for runners
    whose ML Metadata contexts differ (TFX's Airflow runner records its legacy ones)."""
    node_of = {e.id: (pipeline, node) for e, node in zip(executions, nodes, strict=True)}
    return _summarize(_Graph(store), run_id, executions, node_of, metrics=True)


def _summarize(graph: _Graph, run_id: str, executions, node_of, metrics: bool) -> PipelineRun:
    components = tuple(
        ComponentRun(
            node_of.get(e.id, ("", "?"))[1],
            _STATES.get(e.last_known_state, "unknown"),
            (e.last_update_time_since_epoch - e.create_time_since_epoch) / 1000,
            e.id,
        )
        for e in executions
    )
    outputs = _outputs_by_key(graph.store.get_events_by_execution_ids([e.id for e in executions]))
    produced = {  # live ones only: a failed execution leaves pending outputs behind
        artifact.id: graph.artifact_types[artifact.type_id]
        for artifact in graph.store.get_artifacts_by_id(
            [i for by_key in outputs.values() for ids in by_key.values() for i in ids]
        )
        if artifact.state == mlmd_pb2.Artifact.LIVE
    }
    first = {  # e.g. 'blessing' -> the ModelBlessing, never the serving check's InfraBlessing
        name: ids[0]
        for by_key in outputs.values()
        for key, ids in by_key.items()
        for name, (output_key, type_name) in _RUN_OUTPUTS.items()
        if key == output_key and produced.get(ids[0]) == type_name
    }
    outcome = {}
    if "blessing" in first:
        blessing = graph.artifact(first["blessing"])
        if "blessed" in blessing.custom_properties:
            outcome["blessed"] = bool(blessing.custom_properties["blessed"].int_value)
    if "evaluation" in first and metrics:
        evaluation_uri = graph.artifact(first["evaluation"]).uri
        outcome["eval_accuracy"] = eval_accuracy(evaluation_uri)
        outcome["per_class"] = per_class_metrics(evaluation_uri)
    outcome.update(_data(graph, first, components, outputs))
    outcome.update(_model_reports(graph, first))
    if "pushed_model" in first:
        pushed = graph.artifact(first["pushed_model"])
        if pushed.custom_properties["pushed"].int_value:
            outcome["pushed_to"] = pushed.custom_properties["pushed_destination"].string_value
            outcome["pushed_model_id"] = pushed.id
    started = min(e.create_time_since_epoch for e in executions)
    ended = max(e.last_update_time_since_epoch for e in executions)
    return PipelineRun(
        run_id=run_id,
        pipeline=node_of.get(executions[0].id, ("?", ""))[0],
        started=_iso(started),
        seconds=(ended - started) / 1000,
        status=_status([c.state for c in components]),
        components=components,
        model_id=first.get("model"),
        examples_id=first.get("examples"),
        **outcome,
    )


def _data(graph: _Graph, first: dict[str, int], components, outputs) -> dict:
    """The span the run used, whether it ingested it, and the ingest's accounting."""
    from data_prep.ingest import IngestOutputs

    data = {}
    if "examples" in first:
        data["span"] = graph.artifact(first["examples"]).properties["span"].int_value
        producers = {
            e for e, by_key in outputs.items() if first["examples"] in by_key.get("examples", [])
        }
        data["new_data"] = any(c.state == "ran" for c in components if c.execution_id in producers)
    if "ingest_report" in first:
        report = graph.artifact(first["ingest_report"])
        label_map = json.loads(report.custom_properties["label_map"].string_value)
        data["class_names"] = tuple(sorted(label_map, key=label_map.get))
        data["ingest_counts"] = {
            name: report.custom_properties[name].int_value
            for name in INGEST_COUNTS
            if name in report.custom_properties
        }
        data["ingest_report"] = IngestOutputs.under(report.uri).report_path
    return data


def _model_reports(graph: _Graph, first: dict[str, int]) -> dict:
    """The training performance report, serving check, TFLite comparison, readable evaluation
    and model card of a run."""
    reports = {}
    if "model" in first:
        from components.trainer_module import REPORT_PROPERTY_PREFIX

        model = graph.artifact(first["model"])
        performance = {
            name.removeprefix(REPORT_PROPERTY_PREFIX): _plain(value)
            for name, value in model.custom_properties.items()
            if name.startswith(REPORT_PROPERTY_PREFIX)
        }
        reports["training_performance"] = performance or None
    if "serving_check" in first:
        check = _properties(graph.artifact(first["serving_check"]))
        reports["serving_check"] = {**check, "blessed": bool(check.get("blessed"))}
    if "tflite" in first:
        reports["tflite"] = _properties(graph.artifact(first["tflite"]))
    if "readable_evaluation" in first:
        from components.evaluation_report import REPORT_FILE

        uri = graph.artifact(first["readable_evaluation"]).uri
        report = _read_json(os.path.join(uri, REPORT_FILE))
        keys = ("accuracy", "macro_f1", "per_class", "most_confused", "misclassified_count")
        reports["evaluation"] = {**{key: report.get(key) for key in keys}, "uri": uri}
    if "model_card" in first:
        card = graph.artifact(first["model_card"])
        placed = card.custom_properties.get("placed_at")
        reports["model_card"] = placed.string_value if placed else card.uri
    return reports


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


# --- Datasets and models ------------------------------------------------------------------


def _dataset(graph: _Graph, examples: mlmd_pb2.Artifact, edges: list[Edge] | None) -> Dataset:
    from data_prep.ingest import IngestOutputs

    record = graph.record(examples)
    producer = graph.producer(examples.id, "examples")
    example_gen = graph.execution(producer) if producer else None
    report, report_record, ingest_config = {}, None, {}
    if producer is not None:
        if edges is not None:
            edges.append(Edge(example_gen.label, record.label, "examples"))
        reports = graph.outputs(producer.id, "ingest_report")
        ingest_config = example_gen.properties.get("ingest_config") or {}
        if reports:
            report_record = graph.record(reports[0])
            if edges is not None:
                edges.append(Edge(example_gen.label, report_record.label, "ingest_report"))
            # The IngestReport folder is laid out like `imgpipe prep` output: report, label map.
            report = _read_json(IngestOutputs.under(reports[0].uri).report_path)
    label_map = report.get("label_map") or _parsed(
        (report_record.properties if report_record else {}).get("label_map", "{}")
    )
    return Dataset(
        examples=record,
        span=record.properties.get("span"),
        split_counts=report.get("accepted_per_split", {}),
        label_map=label_map,
        totals=report.get("totals", {}),
        rejected_per_reason=report.get("rejected_per_reason", {}),
        ingest_report=report_record,
        example_gen=example_gen,
        input=ingest_config.get("input") if isinstance(ingest_config, dict) else None,
        input_fingerprint=example_gen.properties.get("input_fingerprint") if example_gen else None,
    )


def _read_json(path: str) -> dict:
    from apache_beam.io.filesystems import FileSystems

    if not FileSystems.exists(path):
        return {}
    with FileSystems.open(path) as handle:
        return json.load(handle)


def _custom_config(execution: ExecutionRecord) -> dict:
    config = execution.properties.get("custom_config")
    return config if isinstance(config, dict) else {}


def _evaluation(graph: _Graph, evaluator: mlmd_pb2.Execution, edges: list[Edge]) -> Evaluation:
    record = graph.execution(evaluator)
    blessings = graph.outputs(evaluator.id, "blessing")
    evaluations = graph.outputs(evaluator.id, "evaluation")
    baselines = graph.inputs(evaluator.id, "baseline_model")
    blessed = None
    if blessings and "blessed" in blessings[0].custom_properties:
        blessed = bool(blessings[0].custom_properties["blessed"].int_value)
        edges.append(Edge(record.label, graph.record(blessings[0]).label, "blessing"))
    return Evaluation(
        evaluator=record,
        blessed=blessed,
        accuracy=eval_accuracy(evaluations[0].uri) if evaluations else None,
        baseline_model_id=baselines[0].id if baselines else None,
    )


def latest_pushed_model(store: metadata_store.MetadataStore) -> int:
    graph = _Graph(store)
    pushed = [a for a in graph.artifacts_of_type("PushedModel") if _was_pushed(a)]
    if not pushed:
        raise LineageError("no pushed model in this metadata store")
    return max(pushed, key=lambda a: (a.create_time_since_epoch, a.id)).id


def _was_pushed(artifact: mlmd_pb2.Artifact) -> bool:
    return bool(artifact.custom_properties["pushed"].int_value)


def find_model(store: metadata_store.MetadataStore, reference: str) -> int:
    """An artifact id, or the folder a model was pushed to (what a server loads)."""
    if reference.isdigit():
        return int(reference)
    for artifact in _Graph(store).artifacts_of_type("PushedModel"):
        destination = artifact.custom_properties["pushed_destination"].string_value
        if destination and _same_file(destination, reference.rstrip("/")):
            return artifact.id
    raise LineageError(f"{reference!r} is neither an artifact id nor a pushed model's folder")


def model_lineage(store: metadata_store.MetadataStore, artifact_id: int) -> ModelLineage:
    """A PushedModel or Model upstream: pushed model -> model -> Trainer (settings, code) ->
    transform graph -> examples -> ImageExampleGen (input, files, fingerprint); and the
    evaluation that blessed it, whose baseline is named but not followed."""
    graph = _Graph(store)
    artifact = graph.artifact(artifact_id, ("PushedModel", "Model"))
    edges: list[Edge] = []
    pushed_model = pusher = evaluation = None
    if graph.artifact_types[artifact.type_id] == "PushedModel":
        pushed_model = graph.record(artifact)
        pusher_execution = graph.producer(artifact.id, "pushed_model")
        if pusher_execution is None:
            raise LineageError(f"pushed model {artifact.id} has no recorded Pusher execution")
        pusher = graph.execution(pusher_execution)
        edges.append(Edge(pusher.label, pushed_model.label, "pushed_model"))
        models = graph.inputs(pusher_execution.id, "model")
        if not models:
            raise LineageError(f"pushed model {artifact.id}: its Pusher recorded no model")
        model = models[0]
        edges.append(Edge(graph.record(model).label, pusher.label, "model"))
        for blessing in graph.inputs(pusher_execution.id, "model_blessing"):
            edges.append(Edge(graph.record(blessing).label, pusher.label, "model_blessing"))
            evaluator = graph.producer(blessing.id, "blessing")
            if evaluator is not None:
                evaluation = _evaluation(graph, evaluator, edges)
                edges.append(Edge(graph.record(model).label, evaluation.evaluator.label, "model"))
    else:
        model = artifact
        evaluators = [
            e for e in graph.consumers(model.id, "model") if graph.outputs(e.id, "blessing")
        ]
        if evaluators:
            evaluation = _evaluation(graph, evaluators[-1], edges)
            edges.append(Edge(graph.record(model).label, evaluation.evaluator.label, "model"))
    model_record = graph.record(model)
    trainer_execution = graph.producer(model.id, "model")
    if trainer_execution is None:
        raise LineageError(f"model {model.id} has no recorded Trainer execution")
    trainer = graph.execution(trainer_execution)
    edges.append(Edge(trainer.label, model_record.label, "model"))
    warm_started_from = _warm_start_chain(graph, trainer_execution, edges)
    custom = _custom_config(trainer)
    trainer_config = _parsed(custom.get("trainer_config", {}))
    transform_graph = transform = None
    graphs = graph.inputs(trainer_execution.id, "transform_graph")
    if graphs:
        transform_graph = graph.record(graphs[0])
        edges.append(Edge(transform_graph.label, trainer.label, "transform_graph"))
        producer = graph.producer(graphs[0].id, "transform_graph")
        if producer is not None:
            transform = graph.execution(producer)
            edges.append(Edge(transform.label, transform_graph.label, "transform_graph"))
    examples = graph.inputs(trainer_execution.id, "examples")
    if not examples:
        raise LineageError(f"model {model.id}: its Trainer recorded no examples")
    dataset = _dataset(graph, examples[0], edges)
    edges.append(Edge(dataset.examples.label, trainer.label, "examples"))
    if transform is not None:
        for used in graph.inputs(transform.id, "examples"):
            edges.append(Edge(graph.record(used).label, transform.label, "examples"))
    return ModelLineage(
        pushed_model=pushed_model,
        pusher=pusher,
        model=model_record,
        trainer=trainer,
        trainer_config=trainer_config if isinstance(trainer_config, dict) else {},
        code_fingerprint=custom.get("code_fingerprint"),
        evaluation=evaluation,
        transform_graph=transform_graph,
        transform=transform,
        dataset=dataset,
        edges=tuple(dict.fromkeys(edges)),
        warm_started_from=warm_started_from,
    )


def _warm_start_chain(
    graph: _Graph, trainer_execution: mlmd_pb2.Execution, edges: list[Edge]
) -> tuple[ArtifactRecord, ...]:
    """Follows the Trainers' base_model inputs back to a model trained from scratch."""
    chain: list[ArtifactRecord] = []
    execution = trainer_execution
    while execution is not None:
        bases = graph.inputs(execution.id, "base_model")
        if not bases or any(record.id == bases[0].id for record in chain):
            break
        record = graph.record(bases[0])
        edges.append(Edge(record.label, graph.execution(execution).label, "base_model"))
        chain.append(record)
        execution = graph.producer(bases[0].id, "model")
    return tuple(chain)


def _models_trained_on(graph: _Graph, examples_id: int) -> tuple[TrainedModel, ...]:
    by_model: dict[int, list[mlmd_pb2.Execution]] = {}
    for execution in graph.consumers(examples_id, "examples"):
        for model in graph.outputs(execution.id, "model"):
            by_model.setdefault(model.id, []).append(execution)
    trained = []
    for model_id, trainers in sorted(by_model.items()):
        model = graph.artifact(model_id)
        made = [e for e in trainers if e.last_known_state != mlmd_pb2.Execution.CACHED]
        verdicts, pushed = [], []
        for consumer in graph.consumers(model_id, "model"):
            for blessing in graph.outputs(consumer.id, "blessing"):
                if "blessed" in blessing.custom_properties:
                    verdicts.append(bool(blessing.custom_properties["blessed"].int_value))
            for artifact in graph.outputs(consumer.id, "pushed_model"):
                if _was_pushed(artifact):
                    pushed.append(artifact.custom_properties["pushed_destination"].string_value)
        trained.append(
            TrainedModel(
                model=graph.record(model),
                trainer=graph.execution((made or trainers)[0]),
                runs=tuple(sorted({run for t in trainers for run in graph.execution(t).runs})),
                blessed=any(verdicts) if verdicts else None,
                pushed_to=tuple(sorted(set(pushed))),
            )
        )
    return tuple(trained)


def examples_lineage(store: metadata_store.MetadataStore, examples_id: int) -> ExamplesLineage:
    """Downstream of a dataset: the models trained on it, blessed or not, pushed or not."""
    graph = _Graph(store)
    examples = graph.artifact(examples_id, ("Examples",))
    return ExamplesLineage(_dataset(graph, examples, None), _models_trained_on(graph, examples_id))


# --- Run differences ----------------------------------------------------------------------

_SECTIONS = ("config", "code", "data", "metrics", "outcome", "artifacts", "components")


def _flatten(prefix: str, value, into: dict) -> None:
    if isinstance(value, dict):
        for key, inner in value.items():
            _flatten(f"{prefix}.{key}", inner, into)
    elif isinstance(value, list) and any(isinstance(item, (dict, list)) for item in value):
        for index, inner in enumerate(value):
            _flatten(f"{prefix}[{index}]", inner, into)
    else:
        into[prefix] = value


def run_facts(store: metadata_store.MetadataStore, run: PipelineRun) -> dict[str, object]:
    """What a run was made of, flattened to section.key -> value, for comparing runs."""
    graph = _Graph(store)
    facts: dict[str, object] = {}
    for component in run.components:
        facts[f"components.{component.node}"] = component.state
        execution = graph.store.get_executions_by_id([component.execution_id])[0]
        record = graph.execution(execution)
        properties = record.properties
        custom = _custom_config(record)
        if graph.outputs(execution.id, "examples"):
            _flatten("config.ingest", properties.get("ingest_config", {}), facts)
            dataset = _dataset(graph, graph.outputs(execution.id, "examples")[0], None)
            facts["data.input"] = dataset.input
            facts["data.input_fingerprint"] = dataset.input_fingerprint
            _flatten("data.files", dataset.totals, facts)
            _flatten("data.split", dataset.split_counts, facts)
            facts["data.classes"] = ", ".join(sorted(dataset.label_map))
            facts["data.span"] = dataset.span
            facts["artifacts.examples"] = dataset.examples.id
        if graph.outputs(execution.id, "transform_graph"):
            config = {k: v for k, v in custom.items() if k != "code_fingerprint"}
            _flatten("config.transform", config, facts)
            facts["code.transform_module"] = properties.get("module_path")
            facts["artifacts.transform_graph"] = graph.outputs(execution.id, "transform_graph")[
                0
            ].id
        models = graph.outputs(execution.id, "model")
        if models:
            _flatten("config.trainer", _parsed(custom.get("trainer_config", {})), facts)
            facts["code.fingerprint"] = custom.get("code_fingerprint")
            facts["code.trainer_module"] = properties.get("module_path")
            facts["artifacts.model"] = models[0].id
        evaluations = graph.outputs(execution.id, "evaluation")
        if evaluations:
            _flatten("config.eval", properties.get("eval_config", {}), facts)
            facts["metrics.eval_accuracy"] = eval_accuracy(evaluations[0].uri)
    facts["outcome.blessed"] = run.blessed
    facts["outcome.pushed_to"] = run.pushed_to
    return facts


def diff_runs(
    store: metadata_store.MetadataStore, run_a: str, run_b: str, pipeline: str | None = None
) -> RunDiff:
    runs = list_runs(store, pipeline, metrics=False)
    first, second = find_run(runs, run_a), find_run(runs, run_b)
    a, b = run_facts(store, first), run_facts(store, second)
    changes = [
        Change(key.split(".", 1)[0], key.split(".", 1)[1], a.get(key), b.get(key))
        for key in set(a) | set(b)
        if a.get(key) != b.get(key)
    ]
    changes.sort(key=lambda c: (_SECTIONS.index(c.section), c.key))
    return RunDiff(first.run_id, second.run_id, tuple(changes), len(set(a) | set(b)) - len(changes))


# --- Images -------------------------------------------------------------------------------


def _sha256(path: str) -> str | None:
    digest = hashlib.sha256()
    try:
        with open(path, "rb") as handle:
            for block in iter(lambda: handle.read(1 << 20), b""):
                digest.update(block)
    except OSError:
        return None
    return digest.hexdigest()


def _same_file(recorded_uri: str, query: str) -> bool:
    if "://" in recorded_uri or "://" in query:
        return recorded_uri == query
    return os.path.realpath(recorded_uri) == os.path.realpath(query)


def _how_matched(same_path: bool, digest: str | None, row: dict) -> str:
    if not same_path:
        return f"bytes only (recorded as {row['path']})"
    if digest is None:
        return "path (the file is not readable here)"
    return "path and bytes" if row["sha256"] == digest else "path only (the file changed since)"


def image_lineage(store: metadata_store.MetadataStore, path: str) -> ImageLineage:
    """Which datasets (and so which models) included an image, by path or by content.

    Reads each dataset's source index (one line per accepted image, written by the ingest beside
    its report), never the shards. A dataset matches when it recorded the same file (its full
    path, or the path relative to the input as given) or the same bytes under any name.
    """
    from apache_beam.io.filesystems import FileSystems

    from data_prep.ingest import IngestOutputs, read_source_index

    graph = _Graph(store)
    digest = _sha256(path)
    relative = path.replace(os.sep, "/")
    matches, unindexed = [], []
    for examples in graph.artifacts_of_type("Examples"):
        producer = graph.producer(examples.id, "examples")
        if producer is None:  # not an ExampleGen's dataset (e.g. Transform's materialized output)
            continue
        reports = graph.outputs(producer.id, "ingest_report")
        index_path = IngestOutputs.under(reports[0].uri).source_index_path if reports else None
        if index_path is None or not FileSystems.exists(index_path):
            unindexed.append(examples.id)
            continue
        rows = [
            row
            for row in read_source_index(index_path)
            if row["sha256"] == digest or row["path"] == relative or _same_file(row["uri"], path)
        ]
        if not rows:
            continue
        models = _models_trained_on(graph, examples.id)
        span = graph.record(examples).properties.get("span")
        for row in rows:
            same_path = row["path"] == relative or _same_file(row["uri"], path)
            match = _how_matched(same_path, digest, row)
            matches.append(
                ImageMatch(
                    examples.id,
                    span,
                    match,
                    row["path"],
                    row["sha256"],
                    row["split"],
                    row["label"],
                    row["shard"],
                    models,
                )
            )
    return ImageLineage(path, digest, tuple(matches), tuple(unindexed))
