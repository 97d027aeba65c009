"""ML Metadata as a graph of typed hops: the store facade every lineage question walks, and the
plain records (artifacts, executions, followed edges) its answers are made of.

Walks follow named event keys (the components' input and output names: 'pushed_model', 'model',
'transform_graph', 'examples', ...) instead of every edge: a blind upstream walk from a pushed model
also crosses the Evaluator's 'baseline_model' into older models and their datasets.
Only ml_metadata is imported up front: importing TFX loads TensorFlow (tens of seconds), so the
few TFX helpers a walk needs are restated here, each with a test that it answers as TFX's does.
"""

from __future__ import annotations

import dataclasses
import datetime
import json
import os

from google.protobuf import json_format
from ml_metadata import errors
from ml_metadata.metadata_store import metadata_store
from ml_metadata.proto import metadata_store_pb2 as mlmd_pb2

from components.metadata_keys import RUN_CONTEXT as PIPELINE_RUN_CONTEXT
from components.metadata_keys import RUN_NAME

# The contexts TFX records runs in (restated; tests/pipeline/lineage/test_store.py checks them):
# IR-based runners (local, Kubeflow V2 / Vertex) use a 'pipeline_run' and a 'node' context;
# the legacy runner (Airflow) a 'run' context, with the component id on each execution.
NODE_CONTEXT = "node"
LEGACY_RUN_CONTEXT = "run"  # tfx.orchestration.metadata._CONTEXT_TYPE_PIPELINE_RUN
LEGACY_PIPELINE_PROPERTY = "pipeline_name"  # ..._CONTEXT_TYPE_KEY_PIPELINE_NAME
LEGACY_RUN_ID_PROPERTY = "run_id"  # ..._CONTEXT_TYPE_KEY_RUN_ID
LEGACY_COMPONENT_PROPERTY = "component_id"  # ..._CONTEXT_TYPE_KEY_COMPONENT_ID
LEGACY_PIPELINE_ROOT_PROPERTY = "pipeline_root"  # ..._EXECUTION_TYPE_KEY_PIPELINE_ROOT
# The legacy runner records its resolvers as executions of this type, their resolved artifacts
# as OUTPUT events (a baseline model under the key 'model'): they made nothing.
RESOLVER_EXECUTION_TYPE = "tfx.dsl.components.common.resolver.Resolver"
# Where TFX keeps a failed execution's message (tfx.orchestration.portable.mlmd.
# execution_lib._EXECUTION_RESULT).
EXECUTION_RESULT_PROPERTY = "__execution_result__"
INPUT_EVENTS = (mlmd_pb2.Event.INPUT, mlmd_pb2.Event.DECLARED_INPUT)
OUTPUT_EVENTS = (mlmd_pb2.Event.OUTPUT, mlmd_pb2.Event.DECLARED_OUTPUT)
STATES = {
    mlmd_pb2.Execution.NEW: "new",
    mlmd_pb2.Execution.RUNNING: "running",
    mlmd_pb2.Execution.COMPLETE: "ran",
    mlmd_pb2.Execution.FAILED: "failed",
    mlmd_pb2.Execution.CACHED: "cached",
    mlmd_pb2.Execution.CANCELED: "canceled",
}
# Properties TFX puts on every artifact and execution; they answer nothing.
BOOKKEEPING = frozenset({"tfx_version", "is_external", "state", "name", "producer_component"})


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
    run_names: dict[str, str] = dataclasses.field(default_factory=dict)  # of the named runs

    @property
    def label(self) -> str:
        return f"{self.component} #{self.id}"


@dataclasses.dataclass(frozen=True)
class Edge:
    """One followed event: source -> target, named by the component's input or output key."""

    source: str
    target: str
    key: str


def iso_time(millis: int) -> str:
    return datetime.datetime.fromtimestamp(millis / 1000, datetime.timezone.utc).isoformat(
        timespec="seconds"
    )


def plain_value(value: mlmd_pb2.Value):
    kind = value.WhichOneof("value")
    if kind == "struct_value":
        found = json_format.MessageToDict(value.struct_value)
        return json.loads(found["__value__"]) if set(found) == {"__value__"} else found
    if kind == "proto_value":
        return str(value.proto_value.type_url)
    return getattr(value, kind) if kind else None


def parsed_json(value):
    """Exec properties hold JSON text (configs); parse it so settings can be compared."""
    if isinstance(value, str) and value[:1] in "{[":
        try:
            return json.loads(value)
        except json.JSONDecodeError:
            return value
    return value


def plain_properties(node, parse_json: bool = False) -> dict:
    values = {}
    for mapping in (node.properties, node.custom_properties):
        for key, value in mapping.items():
            if key not in BOOKKEEPING and not key.startswith("__"):
                plain = plain_value(value)
                values[key] = parsed_json(plain) if parse_json else plain
    return dict(sorted(values.items()))


def has_key(event: mlmd_pb2.Event, key: str) -> bool:
    """As tfx's event_lib.contains_key: an artifact given under two keys (a model that is also
    its own baseline) has both in one event path."""
    return any(step.HasField("key") and step.key == key for step in event.path.steps)


class MetadataGraph:
    """The store with the few typed hops lineage needs, and caches for one question."""

    def __init__(self, store: metadata_store.MetadataStore):
        self.store = store
        self.artifact_types = {t.id: t.name for t in store.get_artifact_types()}
        self.context_types = {t.name: t.id for t in store.get_context_types()}
        self.execution_types = {t.id: t.name for t in store.get_execution_types()}
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
            if event.type in OUTPUT_EVENTS and has_key(event, key)
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
            if event.type in INPUT_EVENTS and has_key(event, key)
        ]
        return sorted(self.store.get_executions_by_id(ids), key=lambda e: e.id) if ids else []

    def _linked(self, execution_id: int, key: str, types) -> list[mlmd_pb2.Artifact]:
        ids = [
            event.artifact_id
            for event in self.events_of_execution(execution_id)
            if event.type in types and has_key(event, key)
        ]
        return sorted(self.store.get_artifacts_by_id(ids), key=lambda a: a.id) if ids else []

    def inputs(self, execution_id: int, key: str) -> list[mlmd_pb2.Artifact]:
        return self._linked(execution_id, key, INPUT_EVENTS)

    def outputs(self, execution_id: int, key: str) -> list[mlmd_pb2.Artifact]:
        return self._linked(execution_id, key, OUTPUT_EVENTS)

    def record(self, artifact: mlmd_pb2.Artifact) -> ArtifactRecord:
        return ArtifactRecord(
            artifact.id,
            self.artifact_types[artifact.type_id],
            artifact.uri,
            iso_time(artifact.create_time_since_epoch),
            plain_properties(artifact),
        )

    def execution(self, execution: mlmd_pb2.Execution) -> ExecutionRecord:
        try:
            contexts = self.store.get_contexts_by_execution(execution.id)
        except errors.NotFoundError:  # recorded by a command (`imgpipe audit`), not in a run
            contexts = []
        node = next(
            (c.name for c in contexts if c.type_id == self.context_types.get(NODE_CONTEXT)), None
        )
        if node is None:  # the legacy runner names the component on the execution
            legacy = execution.properties.get(LEGACY_COMPONENT_PROPERTY)
            # A command's execution: its type, e.g. imgpipe.LabelAudit.
            node = legacy.string_value if legacy else self.execution_types[execution.type_id]
        runs = tuple(
            sorted(
                c.name
                if c.type_id == self.context_types.get(PIPELINE_RUN_CONTEXT)
                else c.properties[LEGACY_RUN_ID_PROPERTY].string_value
                for c in contexts
                if c.type_id
                in (
                    self.context_types.get(PIPELINE_RUN_CONTEXT),
                    self.context_types.get(LEGACY_RUN_CONTEXT),
                )
            )
        )
        run_names = {
            c.name: c.custom_properties[RUN_NAME].string_value
            for c in contexts
            if c.type_id == self.context_types.get(PIPELINE_RUN_CONTEXT)
            and RUN_NAME in c.custom_properties
        }
        elapsed = execution.last_update_time_since_epoch - execution.create_time_since_epoch
        return ExecutionRecord(
            execution.id,
            node.split(".", 1)[-1],
            STATES.get(execution.last_known_state, "unknown"),
            iso_time(execution.create_time_since_epoch),
            elapsed / 1000,
            runs,
            plain_properties(execution, parse_json=True),
            run_names,
        )


def read_json(path: str) -> dict:
    from data_prep.reading import file_access

    if not file_access.exists(path):
        return {}
    return json.loads(file_access.read_bytes(path))


def custom_config(execution: ExecutionRecord) -> dict:
    config = execution.properties.get("custom_config")
    return config if isinstance(config, dict) else {}


def same_file(recorded_uri: str, query: str) -> bool:
    if "://" in recorded_uri or "://" in query:
        return recorded_uri == query
    return os.path.realpath(recorded_uri) == os.path.realpath(query)
