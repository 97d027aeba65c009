"""Before a run: the pipeline's serving folder holds what ML Metadata says was pushed there.

A cached Pusher would report an earlier push again without looking at its folder. A push whose
version folder is gone, or no longer holds the files pushed (their SHA-256 recorded by
components/serving/pusher.py), is marked DELETED in ML Metadata: TFX answers a component from
its cache only when every output artifact is LIVE, so the Pusher of this run pushes again. A
changed version folder is renamed aside, never deleted, so a model server falls back to the
newest whole version. The staging folders of this pipeline's earlier runs (named after runs
this store recorded, or under Airflow after the push's execution, and that are over: the caller
holds the pipeline's lock, or is the Airflow DAG's last task, and has marked dead runs failed)
are removed. Anything else in the folder is not imgpipe's, and stays.
"""

from __future__ import annotations

import os

from ml_metadata.metadata_store import metadata_store
from ml_metadata.proto import metadata_store_pb2 as mlmd_pb2
from tfx.types import standard_component_specs

from components import metadata_keys
from components.serving import pusher, serving_root
from components.serving.versions import served_version
from pipeline.lineage.store import (
    LEGACY_COMPONENT_PROPERTY,
    LEGACY_PIPELINE_PROPERTY,
    LEGACY_PIPELINE_ROOT_PROPERTY,
    LEGACY_RUN_CONTEXT,
)

_UNFINISHED = (mlmd_pb2.Execution.NEW, mlmd_pb2.Execution.RUNNING)


def repair_serving_folder(
    store: metadata_store.MetadataStore, base_directory: str, pipeline: str
) -> list[str]:
    """Marks the pushes under base_directory whose folder no longer holds them (moving a
    changed folder aside), removes the staging folders of the pipeline's finished runs; one
    line per thing done, for the console. Takes the serving folder's lock."""
    if not serving_root.is_local(base_directory) or not os.path.isdir(base_directory):
        return []
    with serving_root.locked(base_directory):
        lines = _check_pushes(store, base_directory)
        if lines:  # a push is no longer served
            served = served_version(base_directory)
            serves = "no version" if served is None else f"version {served}"
            lines.append(f"{serves} of {base_directory} serves now")
        for path in _finished_staging(store, base_directory, pipeline):
            if serving_root.remove_staged(path, base_directory):
                lines.append(f"removed {path}: the staging folder of a push that did not finish")
    return lines


def _check_pushes(store: metadata_store.MetadataStore, base_directory: str) -> list[str]:
    lines = []
    base = os.path.abspath(base_directory).rstrip("/") + "/"
    for artifact in store.get_artifacts_by_type("PushedModel"):
        properties = artifact.custom_properties
        if (
            artifact.state != mlmd_pb2.Artifact.LIVE
            or pusher.PUSHED not in properties
            or properties[pusher.PUSHED].int_value != 1
            or pusher.DESTINATION not in properties
            or not properties[pusher.DESTINATION].string_value.startswith(base)
        ):
            continue
        destination = properties[pusher.DESTINATION].string_value
        recorded = (
            properties[pusher.PUSHED_FILES].string_value
            if pusher.PUSHED_FILES in properties
            else None
        )
        problems = pusher.version_problems(destination, recorded)
        if not problems:
            continue
        artifact.state = mlmd_pb2.Artifact.DELETED
        store.put_artifacts([artifact])
        line = f"pushed model {destination} no longer holds what was pushed ({'; '.join(problems)})"
        aside = None
        if os.path.dirname(destination) == os.path.abspath(base_directory):
            aside = serving_root.move_aside(destination, base_directory)
        if aside:
            line += f": moved aside to {aside}"
        lines.append(f"{line}; it is pushed again when its model is still blessed")
    return lines


def _finished_staging(
    store: metadata_store.MetadataStore, base_directory: str, pipeline: str
) -> list[str]:
    """The staging folders in base_directory named after runs of the pipeline that this store
    recorded and that are over, or after their executions under Airflow."""
    finished = {
        pusher.staging_name(context.name)
        for context in store.get_contexts_by_type(metadata_keys.RUN_CONTEXT)
        if context.custom_properties.get(metadata_keys.RUN_PIPELINE, mlmd_pb2.Value()).string_value
        == pipeline
        and context.custom_properties.get(metadata_keys.RUN_STATE, mlmd_pb2.Value()).string_value
        not in ("", metadata_keys.STATE_RUNNING)
    }
    finished |= _finished_legacy_staging(store, pipeline)
    return [
        os.path.join(base_directory, name)
        for name in sorted(os.listdir(base_directory))
        if name.startswith(pusher.TEMPORARY_PREFIX) and name in finished
    ]


def _finished_legacy_staging(store: metadata_store.MetadataStore, pipeline: str) -> set[str]:
    """The staging folder names of the pipeline's executions under TFX's legacy launcher
    (Airflow) that are over. Its executor gets no run id, so a push stages under the name of its
    output folder, which the launcher puts at <pipeline root>/<component>/<output key>/<execution
    id> (tfx.dsl.components.base.base_driver), each recorded on the execution before it runs."""
    names = set()
    for run in store.get_contexts_by_type(LEGACY_RUN_CONTEXT):
        if run.properties[LEGACY_PIPELINE_PROPERTY].string_value != pipeline:
            continue
        for execution in store.get_executions_by_context(run.id):
            root = execution.properties.get(LEGACY_PIPELINE_ROOT_PROPERTY)
            if execution.last_known_state in _UNFINISHED or not root:
                continue
            output = os.path.join(
                root.string_value,
                execution.properties[LEGACY_COMPONENT_PROPERTY].string_value,
                standard_component_specs.PUSHED_MODEL_KEY,
                str(execution.id),
            )
            names.add(pusher.output_staging_name(output))
    return names
