"""Progress of long work (the ingest, training) as one log line a console can read back.

Progress travels as a log record, so it reaches the console whether the work runs in the CLI's
process or in a Beam worker (whose logs arrive as text): `progress ingest done=120 total=1800`.
The producer calls report(); the console calls parse(). No TFX or console code here: data_prep
and the trainer both use it.
"""

from __future__ import annotations

import dataclasses
import logging
import re
import threading
import time

_LINE = re.compile(r"progress (?P<task>[a-z_]+)(?P<fields>(?: [a-z_]+=[-+.\w]+)+)")


@dataclasses.dataclass(frozen=True)
class ProgressEvent:
    task: str  # ingest, training
    # done and total; seconds (the producer's time for `done`, so a rate needs one event); what
    # the task adds (worker, epoch, loss, ...).
    fields: dict[str, float]


def report(logger: logging.Logger, task: str, **fields: float) -> None:
    """Logs one progress line at INFO; fields are numbers (done, total and seconds at least)."""
    logger.info("progress %s %s", task, " ".join(f"{k}={v:.6g}" for k, v in fields.items()))


_NOTICE = re.compile(r"notice: (?P<text>.+)$")


def notice(logger: logging.Logger, text: str) -> None:
    """Logs one line the console shows as it is: a change the run made to what was asked
    (stretched epochs, say), which a user must not have to find in the log."""
    logger.info("notice: %s", text)


def parse_notice(message: str) -> str | None:
    """The text of a notice line (also inside a forwarded worker log line), or None."""
    found = _NOTICE.search(message)
    return found.group("text") if found else None


def parse(message: str) -> ProgressEvent | None:
    """The event in a log message (also inside a forwarded worker log line), or None."""
    found = _LINE.search(message)
    if not found:
        return None
    pairs = (pair.split("=", 1) for pair in found.group("fields").split())
    return ProgressEvent(found.group("task"), {key: float(value) for key, value in pairs})


class ProgressCounter:
    """Work done in this process per run, whatever thread did it, and when a line is due: the
    console adds up one count per worker process, and Beam may run one run's bundles on several
    threads of a process (the DirectRunner's multi_threading mode, any runner's SDK harness)."""

    def __init__(self, every_s: float):
        self._every_s = every_s
        self._lock = threading.Lock()
        self._runs: dict[str, list] = {}  # run -> [started, last line, done]

    def add(self, run: str, done: int, began: float) -> tuple[int, float] | None:
        """Adds done, work that began at time.monotonic() `began`; returns (done in this process
        so far, seconds since the earliest such work began) when a line is due: at the first add
        of a run, then at most every every_s seconds. Timed from when the work began, so the
        first line has a rate."""
        now = time.monotonic()
        with self._lock:
            state = self._runs.setdefault(run, [began, None, 0])
            state[0] = min(state[0], began)
            state[2] += done
            started, last_line, total = state
            if last_line is not None and now - last_line < self._every_s:
                return None
            state[1] = now
        return total, now - started
