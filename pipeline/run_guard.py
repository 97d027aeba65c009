"""One run at a time per pipeline and metadata store, and run states that never lie.

A run holds an exclusive lock (fcntl.flock on a file beside the SQLite store, one per pipeline)
for its whole life; the operating system releases it when the process ends, however it ends
(SIGKILL included). So "the lock is free" proves that no process is running the pipeline, and any
execution still RUNNING in ML Metadata is an orphan: mark_orphans records it as FAILED, naming the
process that left it. The lock file holds the holder's pid, host and start time, for the message a
second run prints.
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

from ml_metadata.metadata_store import metadata_store
from ml_metadata.proto import metadata_store_pb2 as mlmd_pb2

_UNFINISHED = (mlmd_pb2.Execution.NEW, mlmd_pb2.Execution.RUNNING)
# TFX's context types (tfx.dsl.compiler.constants; not imported: TFX loads slowly).
_PIPELINE_CONTEXT, RUN_CONTEXT = "pipeline", "pipeline_run"
ENDED_BY = "imgpipe_ended_by"  # execution custom property: why imgpipe closed an execution


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


def mark_interrupted(store: metadata_store.MetadataStore, run_id: str, reason: str) -> None:
    """Marks what the run (a pipeline_run context) left unfinished CANCELED: shown interrupted."""
    executions = _unfinished(store, RUN_CONTEXT, run_id)
    _close(store, executions, mlmd_pb2.Execution.CANCELED, reason)


def mark_orphans(store: metadata_store.MetadataStore, pipeline: str, last: Holder | None) -> int:
    """Marks the pipeline's unfinished executions FAILED; call only while holding its lock (no
    live process can own them then). Returns how many were marked."""
    orphans = _unfinished(store, _PIPELINE_CONTEXT, pipeline)
    who = last.describe() if last else "an earlier process"
    _close(store, orphans, mlmd_pb2.Execution.FAILED, f"{who} ended without finishing")
    return len(orphans)


def settle_orphans(metadata_path: str) -> None:
    """Before runs are listed from a local SQLite store: marks the unfinished executions of every
    pipeline that no live process is running (its lock is free) as failed."""
    if not os.path.exists(metadata_path):
        return
    config = mlmd_pb2.ConnectionConfig()
    config.sqlite.filename_uri = metadata_path
    store = metadata_store.MetadataStore(config)
    for context in store.get_contexts_by_type(_PIPELINE_CONTEXT):
        if not _unfinished(store, _PIPELINE_CONTEXT, context.name):
            continue
        try:
            handle = open(lock_path(metadata_path, context.name), "a+")  # noqa: SIM115
        except OSError:
            continue  # a store we may read but not write beside: leave it as it is
        with handle:
            try:
                fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                continue  # running now: its RUNNING executions are true
            try:
                mark_orphans(store, context.name, _read_holder(handle))
            finally:
                fcntl.flock(handle, fcntl.LOCK_UN)
