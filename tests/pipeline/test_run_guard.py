"""One run at a time per pipeline and store, and executions a dead process left RUNNING shown as
failed (on a hand-made ML Metadata store; the end-to-end tests kill real runs)."""

import os
import socket
import threading

import pytest
from ml_metadata.metadata_store import metadata_store
from ml_metadata.proto import metadata_store_pb2 as mlmd_pb2

from pipeline import run_guard


def _store(path):
    config = mlmd_pb2.ConnectionConfig()
    config.sqlite.filename_uri = str(path)
    return metadata_store.MetadataStore(config)


def _pipeline_with(store, name, states):
    """A `pipeline` context (as TFX records one) holding executions in the given states."""
    context_type = store.put_context_type(mlmd_pb2.ContextType(name="pipeline"))
    [context_id] = store.put_contexts([mlmd_pb2.Context(type_id=context_type, name=name)])
    execution_type = store.put_execution_type(mlmd_pb2.ExecutionType(name="Trainer"))
    ids = store.put_executions(
        [mlmd_pb2.Execution(type_id=execution_type, last_known_state=s) for s in states]
    )
    store.put_attributions_and_associations(
        [], [mlmd_pb2.Association(context_id=context_id, execution_id=i) for i in ids]
    )
    return ids


def _states(store, ids):
    return [e.last_known_state for e in store.get_executions_by_id(ids)]


def test_a_second_run_fails_at_once_naming_the_holder(tmp_path):
    db = str(tmp_path / "metadata.db")
    with run_guard.exclusive_run(db, "imgpipe", wait=False) as (me, previous):
        assert (me.pid, me.host, previous) == (os.getpid(), socket.gethostname(), None)
        with pytest.raises(run_guard.RunBusy, match=f"process {os.getpid()} on "):
            with run_guard.exclusive_run(db, "imgpipe", wait=False):
                pass
        # Another pipeline on the same store is not blocked.
        with run_guard.exclusive_run(db, "other", wait=False):
            pass
    with run_guard.exclusive_run(db, "imgpipe", wait=False) as (_, previous):
        assert previous.pid == os.getpid()  # the last holder, for the orphans' record


def test_a_second_run_waits_saying_so_then_runs(tmp_path):
    db = str(tmp_path / "metadata.db")
    said, order = [], []
    first_holds, release = threading.Event(), threading.Event()

    def first():
        with run_guard.exclusive_run(db, "imgpipe", wait=False):
            first_holds.set()
            release.wait(10)
            order.append("first done")

    thread = threading.Thread(target=first)
    thread.start()
    first_holds.wait(10)

    def on_wait(message):
        said.append(message)
        release.set()

    with run_guard.exclusive_run(db, "imgpipe", wait=True, on_wait=on_wait):
        order.append("second runs")
    thread.join()
    assert order == ["first done", "second runs"]
    assert len(said) == 1 and "is already running" in said[0] and "waiting" in said[0]


def test_listing_marks_what_a_dead_run_left_running_as_failed(tmp_path):
    db = tmp_path / "metadata.db"
    store = _store(db)
    running, complete = _pipeline_with(
        store, "imgpipe", [mlmd_pb2.Execution.RUNNING, mlmd_pb2.Execution.COMPLETE]
    )
    with run_guard.exclusive_run(str(db), "imgpipe", wait=False):
        run_guard.settle_orphans(str(db))  # a live run holds the lock: its states are true
        assert _states(store, [running, complete]) == [
            mlmd_pb2.Execution.RUNNING,
            mlmd_pb2.Execution.COMPLETE,
        ]
    run_guard.settle_orphans(str(db))  # the lock is free: nobody runs it any more
    assert _states(store, [running, complete]) == [
        mlmd_pb2.Execution.FAILED,
        mlmd_pb2.Execution.COMPLETE,
    ]
    [marked] = store.get_executions_by_id([running])
    reason = marked.custom_properties[run_guard.ENDED_BY].string_value
    assert f"process {os.getpid()} on {socket.gethostname()}" in reason


def test_interrupted_run_is_marked_canceled(tmp_path):
    store = _store(tmp_path / "metadata.db")
    [running] = _pipeline_with(store, "imgpipe", [mlmd_pb2.Execution.RUNNING])
    run_type = store.put_context_type(mlmd_pb2.ContextType(name=run_guard.RUN_CONTEXT))
    [run] = store.put_contexts([mlmd_pb2.Context(type_id=run_type, name="run-1")])
    store.put_attributions_and_associations(
        [], [mlmd_pb2.Association(context_id=run, execution_id=running)]
    )
    run_guard.mark_interrupted(store, "run-1", "interrupted")
    assert _states(store, [running]) == [mlmd_pb2.Execution.CANCELED]
