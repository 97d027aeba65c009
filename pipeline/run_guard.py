"""One run at a time per pipeline and metadata store, and run states that never lie.

A run holds an exclusive lock (fcntl.flock on a file beside the SQLite store, one per pipeline)
for its whole life; the operating system releases it when the process ends, however it ends
(SIGKILL included). So "the lock is free" proves that no process is running the pipeline, and any
run or execution still RUNNING in ML Metadata is an orphan: mark_orphans records it as failed,
naming the process that left it. The lock file holds the holder's pid, host and start time, for
the message a second run prints.

A run records itself on its pipeline_run context before TFX starts (TFX then reuses the context):
pipeline, pid, host, config file and state (running, then complete, failed or interrupted), so a
run killed between two components is not taken for a complete one.
"""

from __future__ import annotations

import contextlib
import dataclasses
import datetime
import fcntl
import json
import os
import socket
from collections.abc import Callable, Iterator

from ml_metadata import errors
from ml_metadata.metadata_store import metadata_store
from ml_metadata.proto import metadata_store_pb2 as mlmd_pb2

from components.metadata_keys import (
    ENDED_BY,
    PIPELINE_CONTEXT,
    RUN_CONFIG_FILE,
    RUN_CONTEXT,
    RUN_HOST,
    RUN_NAME,
    RUN_PID,
    RUN_PIPELINE,
    RUN_SET,
    RUN_STATE,
    STATE_FAILED,
    STATE_INTERRUPTED,
    STATE_RUNNING,
)

_UNFINISHED = (mlmd_pb2.Execution.NEW, mlmd_pb2.Execution.RUNNING)


@dataclasses.dataclass(frozen=True)
class Holder:
    """The process that holds (or last held) a pipeline's lock."""

    pid: int
    host: str
    started: str  # ISO time, UTC

    @classmethod
    def me(cls) -> Holder:
        started = datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")
        return cls(os.getpid(), socket.gethostname(), started)

    def describe(self) -> str:
        return f"process {self.pid} on {self.host}, started {self.started}"


class RunBusy(RuntimeError):
    """Another process is running the same pipeline on the same metadata store."""

    def __init__(self, pipeline: str, holder: Holder | None):
        who = holder.describe() if holder else "another process"
        super().__init__(f"pipeline {pipeline!r} is already running in this store ({who})")
        self.holder = holder


def lock_path(metadata_path: str, pipeline: str) -> str:
    return f"{metadata_path}.{pipeline}.lock"


def _read_holder(handle) -> Holder | None:
    handle.seek(0)
    try:
        return Holder(**json.loads(handle.read()))
    except (ValueError, TypeError):
        return None  # written by nobody yet, or mid-write


@contextlib.contextmanager
def exclusive_run(
    metadata_path: str,
    pipeline: str,
    wait: bool,
    on_wait: Callable[[str], None] = lambda message: None,
) -> Iterator[tuple[Holder, Holder | None]]:
    """Holds the pipeline's lock for the block, yielding this process and the lock's previous
    holder. Busy: waits (telling on_wait who holds it) when `wait`, else raises RunBusy."""
    path = lock_path(metadata_path, pipeline)
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    with open(path, "a+") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = _read_holder(handle)
            if not wait:
                raise RunBusy(pipeline, holder) from None
            on_wait(f"{RunBusy(pipeline, holder)}; waiting for it to finish")
            fcntl.flock(handle, fcntl.LOCK_EX)
        previous, me = _read_holder(handle), Holder.me()
        handle.seek(0)
        handle.truncate()
        handle.write(json.dumps(dataclasses.asdict(me)))
        handle.flush()
        try:
            yield me, previous
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _unfinished(
    store: metadata_store.MetadataStore, context_type: str, name: str
) -> list[mlmd_pb2.Execution]:
    context = store.get_context_by_type_and_name(context_type, name)
    if context is None:
        return []
    return [
        e for e in store.get_executions_by_context(context.id) if e.last_known_state in _UNFINISHED
    ]


def _close(
    store: metadata_store.MetadataStore,
    executions: list[mlmd_pb2.Execution],
    state: int,
    reason: str,
) -> None:
    for execution in executions:
        execution.last_known_state = state
        execution.custom_properties[ENDED_BY].string_value = reason
    if executions:
        store.put_executions(executions)


def _run_context(store: metadata_store.MetadataStore, run_id: str) -> mlmd_pb2.Context:
    try:
        type_id = store.get_context_type(RUN_CONTEXT).id
    except errors.NotFoundError:
        type_id = store.put_context_type(mlmd_pb2.ContextType(name=RUN_CONTEXT))
    found = store.get_context_by_type_and_name(RUN_CONTEXT, run_id)
    return found or mlmd_pb2.Context(type_id=type_id, name=run_id)


def error_line(error: BaseException) -> str:
    """An exception in one line, its own words: Beam wraps a worker's exception in its
    traceback, so the cause is the last line."""
    lines = [line.strip() for line in str(error).strip().splitlines() if line.strip()]
    return f"{type(error).__name__}: {lines[-1] if lines else ''}".rstrip(": ")[:400]


def begin_run(
    store: metadata_store.MetadataStore,
    run_id: str,
    pipeline: str,
    holder: Holder,
    config_file: str | None = None,
    overrides: tuple[str, ...] = (),
    name: str | None = None,
) -> None:
    """Records the run (state running) before its first component starts, with the settings
    its config file gave (JSON), its --set overrides and the name or note it was given."""
    context = _run_context(store, run_id)
    properties = context.custom_properties
    properties[RUN_PIPELINE].string_value = pipeline
    properties[RUN_PID].int_value = holder.pid
    properties[RUN_HOST].string_value = holder.host
    properties[RUN_STATE].string_value = STATE_RUNNING
    if config_file is not None:
        properties[RUN_CONFIG_FILE].string_value = config_file
    if overrides:
        properties[RUN_SET].string_value = json.dumps(list(overrides))
    if name:
        properties[RUN_NAME].string_value = name
    store.put_contexts([context])


def end_run(
    store: metadata_store.MetadataStore, run_id: str, state: str, reason: str | None = None
) -> None:
    """Records how the run ended; an interrupted run's unfinished executions become CANCELED."""
    context = _run_context(store, run_id)
    context.custom_properties[RUN_STATE].string_value = state
    if reason:
        context.custom_properties[ENDED_BY].string_value = reason
    store.put_contexts([context])
    if state == STATE_INTERRUPTED:
        executions = _unfinished(store, RUN_CONTEXT, run_id)
        _close(store, executions, mlmd_pb2.Execution.CANCELED, reason or STATE_INTERRUPTED)


def _running_runs(store: metadata_store.MetadataStore) -> list[mlmd_pb2.Context]:
    return [
        context
        for context in store.get_contexts_by_type(RUN_CONTEXT)
        if context.custom_properties.get(RUN_STATE, mlmd_pb2.Value()).string_value == STATE_RUNNING
    ]


def mark_orphans(store: metadata_store.MetadataStore, pipeline: str, last: Holder | None) -> int:
    """Marks the pipeline's unfinished runs and executions failed; call only while holding its
    lock (no live process can own them then). Returns how many executions were marked."""
    reason = f"{last.describe() if last else 'an earlier process'} ended without finishing"
    for run in _running_runs(store):
        if run.custom_properties[RUN_PIPELINE].string_value == pipeline:
            end_run(store, run.name, STATE_FAILED, reason)
    orphans = _unfinished(store, PIPELINE_CONTEXT, pipeline)
    _close(store, orphans, mlmd_pb2.Execution.FAILED, reason)
    return len(orphans)


def settle_orphans(metadata_path: str) -> None:
    """Before runs are listed from a local SQLite store: marks the unfinished runs and executions
    of every pipeline that no live process is running (its lock is free) as failed."""
    if not os.path.exists(metadata_path):
        return
    config = mlmd_pb2.ConnectionConfig()
    config.sqlite.filename_uri = metadata_path
    store = metadata_store.MetadataStore(config)
    pipelines = {
        context.name
        for context in store.get_contexts_by_type(PIPELINE_CONTEXT)
        if _unfinished(store, PIPELINE_CONTEXT, context.name)
    } | {run.custom_properties[RUN_PIPELINE].string_value for run in _running_runs(store)}
    for pipeline in sorted(pipelines):
        try:
            handle = open(lock_path(metadata_path, pipeline), "a+")  # noqa: SIM115
        except OSError:
            continue  # a store we may read but not write beside: leave it as it is
        with handle:
            try:
                fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                continue  # running now: its RUNNING executions are true
            try:
                mark_orphans(store, pipeline, _read_holder(handle))
            finally:
                fcntl.flock(handle, fcntl.LOCK_UN)
