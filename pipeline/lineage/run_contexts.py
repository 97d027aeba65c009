"""Which runs a metadata store holds, whichever orchestrator recorded them: each run's id,
pipeline and executions, and the component (node id) of each execution. pipeline/lineage/runs.py
builds the run records from these."""

from __future__ import annotations

import dataclasses

from ml_metadata.proto import metadata_store_pb2 as mlmd_pb2

from components import metadata_keys
from pipeline.lineage.store import (
    LEGACY_COMPONENT_PROPERTY,
    LEGACY_PIPELINE_PROPERTY,
    LEGACY_RUN_CONTEXT,
    LEGACY_RUN_ID_PROPERTY,
    NODE_CONTEXT,
    PIPELINE_RUN_CONTEXT,
    MetadataGraph,
)


@dataclasses.dataclass(frozen=True)
class RunMembers:
    """One pipeline run as the store records it: its id, pipeline and executions, each execution
    with its node id."""

    run_id: str
    pipeline: str
    created: int
    executions: list[mlmd_pb2.Execution]
    node_of: dict[int, tuple[str, str]]  # execution id -> (pipeline, node id)
    recorded: str | None = None  # the state the local runner recorded on the run (run_guard)
    ended_by: str | None = None  # why it recorded the run ended so, e.g. a failure's message
    name: str | None = None  # the name or note the run was given (--run-name)


def runs_in_store(graph: MetadataGraph) -> list[RunMembers]:
    """Every run, whichever orchestrator recorded it: the IR-based runners (local, Kubeflow V2 /
    Vertex) put executions in a 'pipeline_run' context and a 'node' context per component; TFX's
    legacy runner (Airflow) puts them in a 'run' context and names the component on the execution
    itself."""
    node_of = {}
    for node in graph.store.get_contexts_by_type(NODE_CONTEXT):
        pipeline_name, _, node_id = node.name.partition(".")
        for execution in graph.store.get_executions_by_context(node.id):
            node_of[execution.id] = (pipeline_name, node_id)
    runs = []
    for context in graph.store.get_contexts_by_type(PIPELINE_RUN_CONTEXT):
        executions = sorted(graph.store.get_executions_by_context(context.id), key=lambda e: e.id)
        names = {node_of[e.id][0] for e in executions if e.id in node_of}
        pipeline = min(names) if names else "?"
        recorded = context.custom_properties.get(metadata_keys.RUN_STATE)
        ended_by = context.custom_properties.get(metadata_keys.ENDED_BY)
        name = context.custom_properties.get(metadata_keys.RUN_NAME)
        runs.append(
            RunMembers(
                context.name,
                pipeline,
                context.create_time_since_epoch,
                executions,
                node_of,
                recorded.string_value if recorded else None,
                ended_by.string_value if ended_by else None,
                name.string_value if name else None,
            )
        )
    for context in graph.store.get_contexts_by_type(LEGACY_RUN_CONTEXT):
        executions = sorted(graph.store.get_executions_by_context(context.id), key=lambda e: e.id)
        pipeline = context.properties[LEGACY_PIPELINE_PROPERTY].string_value
        legacy_nodes = {
            e.id: (pipeline, e.properties[LEGACY_COMPONENT_PROPERTY].string_value)
            for e in executions
        }
        runs.append(
            RunMembers(
                context.properties[LEGACY_RUN_ID_PROPERTY].string_value,
                pipeline,
                context.create_time_since_epoch,
                executions,
                legacy_nodes,
            )
        )
    return sorted(runs, key=lambda run: (run.created, run.run_id), reverse=True)
