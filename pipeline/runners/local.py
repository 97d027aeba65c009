"""Runs the pipeline on this machine: LocalDagRunner, Beam DirectRunner, SQLite ML Metadata."""

from __future__ import annotations

import datetime
import logging
import os
from collections.abc import Callable

from ml_metadata.metadata_store import metadata_store
from tfx.dsl.compiler import compiler, constants
from tfx.orchestration import metadata
from tfx.orchestration.local.local_dag_runner import LocalDagRunner
from tfx.orchestration.portable import runtime_parameter_utils

from components import metadata_keys
from pipeline import interrupts, run_guard
from pipeline.code_fingerprint import code_fingerprint
from pipeline.config.pipeline_config import PipelineConfig, check_data_fits, with_absolute_paths
from pipeline.factory import create_pipeline
from pipeline.lineage import STOPPED_BY_GATE, PipelineRun, run_record
from pipeline.mlmd_connection import MlmdTarget, check_sqlite_store
from pipeline.runners.damaged_examples import damaged_shard_failure
from pipeline.serving.rollback import pinned_note
from pipeline.serving.serving_folder import repair_serving_folder
from pipeline.ui.report import report_path, write_report
from pipeline.validation.data_snapshot import take_snapshot

LOGGER = logging.getLogger(__name__)


def open_store(metadata_path: str) -> metadata_store.MetadataStore:
    return metadata_store.MetadataStore(metadata.sqlite_metadata_connection_config(metadata_path))


def run_local(
    config: PipelineConfig,
    wait: bool = True,
    on_wait: Callable[[str], None] = lambda message: None,
    config_file: str | None = None,
    store_target: MlmdTarget | None = None,
    say: Callable[[str], None] = LOGGER.info,
    overrides: tuple[str, ...] = (),
    name: str | None = None,
) -> PipelineRun:
    """Validates, takes the pipeline's lock (waiting when `wait`, else raising RunBusy), marks
    what a dead earlier run left RUNNING as failed, numbers the input's span, runs the whole
    pipeline, summarizes this run (not the store's newest) from ML Metadata and writes its
    self-contained HTML report beside the run summaries.

    config_file: the settings the run's config file gave (JSON), and overrides its --set
    settings, recorded with the run (`imgpipe runs diff` shows them), as is `name`, the run's
    name or note (--run-name). A
    Ctrl-C (KeyboardInterrupt) records the run as interrupted and propagates, as does the error a
    library raised in its place (pipeline/interrupts.py). A span the data
    gate stops ends the run without an exception: its record says why (stopped_by,
    not_pushed_reason); any other component's failure propagates.
    store_target: the ML Metadata store to write (default: config.metadata_path, SQLite). The
    lock file stays beside config.metadata_path, so with a server store it orders the runs of
    one build folder; an orchestrator (Airflow's max_active_runs=1) orders them across hosts.
    say: shows a line on the console: what was repaired in the serving folder before the run,
    a report that could not be written (a by-product: the run keeps its outcome), and a
    rollback that keeps a newer pushed version from serving.
    """
    config = with_absolute_paths(config.validate())
    store, connection = _open_store(config, store_target)
    lock = run_guard.exclusive_run(config.metadata_path, config.name, wait, on_wait)
    with lock as (holder, previous):
        run_guard.mark_orphans(store, config.name, previous)
        serving_folder = os.path.join(config.serving_dir, config.name)
        for line in repair_serving_folder(store, serving_folder, config.name):
            say(line)
        ir, run_id = _compiled(config, store, connection)
        run_guard.begin_run(store, run_id, config.name, holder, config_file, overrides, name)
        failure = _run_recorded(ir, store, run_id, holder)
    summary = run_record(store, config.name, run_id)
    if failure is not None:
        _raise_unless_gate_stopped(store, summary, failure)
    _write_run_report(store, config, summary, say)
    note = pinned_note(serving_folder)
    if note:  # a rollback keeps this run's push from serving
        say(note)
    return summary


def _open_store(config: PipelineConfig, store_target: MlmdTarget | None):
    """The store the run writes (config.metadata_path's SQLite file unless another is given)
    and its connection config; an existing SQLite file must be an ML Metadata store."""
    os.makedirs(os.path.dirname(os.path.abspath(config.metadata_path)), exist_ok=True)
    target = store_target or MlmdTarget(sqlite=config.metadata_path)
    connection = target.connection_config(read_only=False)
    if target.backend() == "sqlite" and os.path.lexists(connection.sqlite.filename_uri):
        check_sqlite_store(connection.sqlite.filename_uri)  # a new file only where none is
    return metadata_store.MetadataStore(connection), connection


def _compiled(config: PipelineConfig, store, connection) -> tuple:
    """The input's snapshot (its span numbered), checked against the settings, made into the
    pipeline and compiled with this run's id: (pipeline IR, run id)."""
    data = take_snapshot(config.ingest.input, store, config.name)
    check_data_fits(config, data.files)
    pipeline = create_pipeline(config, data, code_fingerprint, connection)
    # Compiled here (as LocalDagRunner.run does, less its step for module_file wheels: our
    # code is imported by name) so that this process names its own run.
    ir = compiler.Compiler().compile(pipeline)
    run_id = datetime.datetime.now().isoformat()
    runtime_parameter_utils.substitute_runtime_parameter(
        ir, {constants.PIPELINE_RUN_ID_PARAMETER_NAME: run_id}
    )
    return ir, run_id


def _run_recorded(ir, store, run_id: str, holder) -> Exception | None:
    """Runs the compiled pipeline and records how it ended; returns a component's failure, and
    lets an interrupt propagate once recorded."""
    state, reason, failure = metadata_keys.STATE_FAILED, None, None
    try:
        with interrupts.failures_as_interrupt():
            LocalDagRunner().run_with_ir(ir)
        state = metadata_keys.STATE_COMPLETE
    except KeyboardInterrupt:
        state = metadata_keys.STATE_INTERRUPTED
        reason = f"interrupted (Ctrl-C or SIGTERM) in {holder.describe()}"
        raise
    except Exception as error:  # noqa: BLE001 - the run record says what it was
        failure, reason = error, run_guard.error_line(error)
    finally:
        run_guard.end_run(store, run_id, state, reason)
    return failure


def _raise_unless_gate_stopped(store, summary: PipelineRun, failure: Exception) -> None:
    """A span the data gate stopped ends the run quietly; any other failure is raised, as a
    damaged-shard failure where the Examples' shards are damaged."""
    if summary.stopped_by != STOPPED_BY_GATE:
        damaged = damaged_shard_failure(store, summary.examples_id, failure)
        if damaged is not None:
            raise damaged from failure
        raise failure  # a component broke: the caller reports it (one error line)
    LOGGER.info("run %s stopped by the data gate", summary.run_id, exc_info=failure)


def _write_run_report(store, config: PipelineConfig, summary: PipelineRun, say) -> None:
    """The run's self-contained HTML report; one that cannot be written is said, not raised."""
    report = report_path(config.pipeline_root, summary.run_id)
    try:
        write_report(store, summary.run_id, report)
    except Exception as error:  # noqa: BLE001  the report is a by-product of the run
        LOGGER.warning("run report %s not written", report, exc_info=True)
        reason = error.strerror if isinstance(error, OSError) and error.strerror else error
        say(f"the run report could not be written to {report}: {reason}")
