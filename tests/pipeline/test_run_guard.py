"""One run at a time per pipeline and store, and executions a dead process left RUNNING shown as
failed (on a hand-made ML Metadata store; the end-to-end tests kill real runs)."""

import os
import socket
import threading

import pytest
from ml_metadata.metadata_store import metadata_store
from ml_metadata.proto import metadata_store_pb2 as mlmd_pb2

from components import metadata_keys
from pipeline import lineage, run_guard


def _store(path):
    config = mlmd_pb2.ConnectionConfig()
    config.sqlite.filename_uri = str(path)
    return metadata_store.MetadataStore(config)


def _pipeline_with(store, name, states, run_id=None):
    """Executions in the given states, associated as TFX associates them: to the `pipeline`
    context, to a `node` context, and (with run_id) to the run's `pipeline_run` context."""
    contexts = [_context(store, "pipeline", name), _context(store, "node", f"{name}.Trainer")]
    if run_id:
        contexts.append(_context(store, metadata_keys.RUN_CONTEXT, run_id))
    execution_type = store.put_execution_type(mlmd_pb2.ExecutionType(name="Trainer"))
    ids = store.put_executions(
        [mlmd_pb2.Execution(type_id=execution_type, last_known_state=s) for s in states]
    )
    store.put_attributions_and_associations(
        [],
        [mlmd_pb2.Association(context_id=c, execution_id=i) for c in contexts for i in ids],
    )
    return ids


def _context(store, type_name, name):
    found = store.get_context_by_type_and_name(type_name, name)
    if found:
        return found.id
    type_id = store.put_context_type(mlmd_pb2.ContextType(name=type_name))
    return store.put_contexts([mlmd_pb2.Context(type_id=type_id, name=name)])[0]


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
    reason = marked.custom_properties[metadata_keys.ENDED_BY].string_value
    assert f"process {os.getpid()} on {socket.gethostname()}" in reason


def _status(store, run_id):
    return {run.run_id: run.status for run in lineage.list_runs(store, metrics=False)}[run_id]


def test_an_interrupted_run_is_shown_interrupted(tmp_path):
    store = _store(tmp_path / "metadata.db")
    run_guard.begin_run(
        store, "run-1", "imgpipe", run_guard.Holder.me(), '{"name": "x"}', ("trainer.epochs=5",)
    )
    done, running = _pipeline_with(
        store, "imgpipe", [mlmd_pb2.Execution.COMPLETE, mlmd_pb2.Execution.RUNNING], "run-1"
    )
    assert _status(store, "run-1") == "running"
    run_guard.end_run(store, "run-1", metadata_keys.STATE_INTERRUPTED, "Ctrl-C")
    assert _states(store, [done, running]) == [
        mlmd_pb2.Execution.COMPLETE,
        mlmd_pb2.Execution.CANCELED,
    ]
    assert _status(store, "run-1") == "interrupted"
    [context] = store.get_contexts_by_type(metadata_keys.RUN_CONTEXT)
    assert context.custom_properties[metadata_keys.RUN_PID].int_value == os.getpid()
    # The config file's settings and the --set ones are facts of the run, for `runs diff`.
    [run] = lineage.list_runs(store, metrics=False)
    facts = lineage.run_facts(store, run)
    assert (facts["config.file.name"], facts["config.set.trainer.epochs"]) == ("x", "5")


def test_a_runs_name_is_recorded_with_it_and_read_back(tmp_path):
    store = _store(tmp_path / "metadata.db")
    run_guard.begin_run(store, "run-1", "imgpipe", run_guard.Holder.me(), name="wider head")
    run_guard.begin_run(store, "run-2", "imgpipe", run_guard.Holder.me())
    for run_id in ("run-1", "run-2"):
        _pipeline_with(store, "imgpipe", [mlmd_pb2.Execution.COMPLETE], run_id)
    names = {run.run_id: run.name for run in lineage.list_runs(store, metrics=False)}
    assert names == {"run-1": "wider head", "run-2": None}


def test_a_component_that_failed_of_the_interrupt_leaves_the_run_interrupted(tmp_path):
    store = _store(tmp_path / "metadata.db")
    run_guard.begin_run(store, "run-1", "imgpipe", run_guard.Holder.me(), None, ())
    _pipeline_with(
        store, "imgpipe", [mlmd_pb2.Execution.COMPLETE, mlmd_pb2.Execution.FAILED], "run-1"
    )
    assert _status(store, "run-1") == "failed"  # what TFX recorded of the component
    run_guard.end_run(store, "run-1", metadata_keys.STATE_INTERRUPTED, "Ctrl-C")
    assert _status(store, "run-1") == "interrupted"


def test_a_run_killed_between_two_components_is_shown_failed_not_complete(tmp_path):
    db = tmp_path / "metadata.db"
    store = _store(db)
    run_guard.begin_run(store, "run-1", "imgpipe", run_guard.Holder.me())
    _pipeline_with(store, "imgpipe", [mlmd_pb2.Execution.COMPLETE], "run-1")
    with run_guard.exclusive_run(str(db), "imgpipe", wait=False):
        run_guard.settle_orphans(str(db))
        assert _status(store, "run-1") == "running"  # its process holds the lock: it is
    run_guard.settle_orphans(str(db))
    assert _status(store, "run-1") == "failed"
