"""The exit status of every `imgpipe` command, by kind of outcome: one table, documented in
docs/operations.md, so scripts and schedulers can tell a refused model from a broken run. A
finished run's status comes from `of_run`, a command that raised from `of_error`; nothing else
maps outcomes to numbers."""

from __future__ import annotations

OK = 0
COMPONENT_FAILED = 1  # a component (or the command's own work) failed; the log has the traceback
BAD_INPUT = 2  # bad configuration, arguments or input data, found before or during the run
NOT_PUSHED = 3  # the run finished, but the model was not blessed or failed the serving check
GATE_STOPPED = 4  # the data gate stopped the run: anomalies, drift or a class change
BUSY = 5  # another run of the same pipeline holds the metadata store's lock
INTERRUPTED = 130  # Ctrl-C or SIGTERM: the run was stopped and marked as interrupted

# Each status in a few words, as `imgpipe run --help` lists them.
IN_WORDS = {
    OK: "pushed",
    COMPONENT_FAILED: "a component failed",
    BAD_INPUT: "bad settings or input",
    NOT_PUSHED: "not pushed",
    GATE_STOPPED: "stopped by the data gate",
    BUSY: "busy",
    INTERRUPTED: "interrupted",
}

# The stages that stop a run from pushing without a component failing (PipelineRun.stopped_by
# names one of them, or else the failed component's node id), and the status each gives.
STOPPED_BY_GATE = "data gate"
STOPPED_BY_EVALUATOR = "evaluator"
STOPPED_BY_SERVING_CHECK = "serving check"
_STATUS_OF_STAGE = {
    STOPPED_BY_GATE: GATE_STOPPED,
    STOPPED_BY_EVALUATOR: NOT_PUSHED,
    STOPPED_BY_SERVING_CHECK: NOT_PUSHED,
}


def of_run(pushed: bool, stopped_by: str | None, failed: bool) -> int:
    """The status of a run that finished: OK when it pushed a model or nothing stopped it, the
    stopping stage's status, else COMPONENT_FAILED (a component failed)."""
    if pushed or (stopped_by is None and not failed):
        return OK
    return _STATUS_OF_STAGE.get(stopped_by, COMPONENT_FAILED)


def of_error(error: BaseException) -> int:
    """The status of a command whose work raised `error`."""
    from data_prep.contract.config_error import ConfigError
    from data_prep.ingest import IngestFailed
    from data_prep.reading.sources import SourceError
    from pipeline.mlmd_connection import StoreNotFound
    from pipeline.run_guard import RunBusy

    if isinstance(error, KeyboardInterrupt):
        return INTERRUPTED
    if isinstance(error, RunBusy):
        return BUSY
    if isinstance(error, (ConfigError, SourceError, IngestFailed, StoreNotFound)):
        return BAD_INPUT
    return COMPONENT_FAILED
