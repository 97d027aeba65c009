"""What a run shows on the console: a line as each component starts and ends, live progress of
the ingest and of training, and (printed by the CLI) the summary. Everything else, from this
process and from every child process (Beam workers, TensorFlow's C++ logs, the TFLite converter,
the serving check), goes to the run log.

The capture works at the file-descriptor level: fds 1 and 2 point at the run log for the whole
run, so child processes inherit it, and the console writes to copies of the original fds.
"""

from __future__ import annotations

import contextlib
import dataclasses
import datetime
import logging
import os
import re
import sys
import time
from collections.abc import Iterator
from typing import IO

from absl import logging as absl_logging

from data_prep.runtime import progress
from data_prep.runtime.terminal import terminal_safe
from pipeline import interrupts

_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"
# What TFX's LocalDagRunner and launcher log around each component (absl logging).
_STARTED = re.compile(r"^Component (\S+) is running\.$")
_FINISHED = re.compile(r"^Component (\S+) is finished\.$")
_CACHED = re.compile(r"^A cached execution \d+ is used\.$")
_FAILED = re.compile(r"^Execution \d+ failed\.$")
_PLAIN_EVERY_S = 15.0  # a plain progress line at most this often per task (plus epoch ends)
_WIDTH = 24  # component names are padded to this


def run_log_path(build_dir: str, command: str) -> str:
    """A new log file for one command's run: <build_dir>/logs/<command>-<UTC time>-<pid>.log."""
    stamp = datetime.datetime.now(datetime.timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    return os.path.join(build_dir, "logs", f"{command}-{stamp}-{os.getpid()}.log")


def _duration(seconds: float) -> str:
    seconds = max(0, int(round(seconds)))
    if seconds < 60:
        return f"{seconds} s"
    if seconds < 3600:
        return f"{seconds // 60} min {seconds % 60} s"
    return f"{seconds // 3600} h {seconds % 3600 // 60} min"


@dataclasses.dataclass
class _Task:
    """One long piece of work seen through its progress events."""

    name: str
    total: float
    by_worker: dict = dataclasses.field(default_factory=dict)  # worker -> (done, seconds)
    last_plain: float = 0.0
    validation: dict = dataclasses.field(default_factory=dict)  # the last one's figures
    bar: object = None  # a tqdm bar on a terminal

    @property
    def done(self) -> float:
        return sum(done for done, _ in self.by_worker.values())

    @property
    def rate(self) -> float:
        """Units per second, all workers together."""
        return sum(done / seconds for done, seconds in self.by_worker.values() if seconds > 0)


def _training_figures(fields: dict) -> str:
    """The running training loss and accuracy, and the validation's when there is one."""
    text = f"loss {fields['loss']:.4f}, accuracy {fields['accuracy']:.4f}"
    if "val_accuracy" in fields:
        text += f", val_loss {fields['val_loss']:.4f}, val_accuracy {fields['val_accuracy']:.4f}"
    return text


class Console:
    """Renders component lines and progress to `out`; a live bar when `out` is a terminal."""

    def __init__(self, out: IO[str]):
        self.out = out
        self.live = out.isatty()
        self.component: str | None = None  # the component running now
        self._component_started = 0.0
        self._outcome = "ran"
        self._tasks: dict[str, _Task] = {}

    def say(self, line: str) -> None:
        self.out.write(terminal_safe(line) + "\n")
        self.out.flush()

    def started(self, component: str) -> None:
        interrupts.honour_request()  # one requested before this component and lost on the way
        self.component, self._component_started, self._outcome = component, time.time(), "ran"
        self.say(f"  {component:<{_WIDTH}} started")

    def outcome(self, outcome: str) -> None:
        self._outcome = outcome

    def finished(self, component: str) -> None:
        # A stop requested while the component ran, and lost inside it, ends the run here; the
        # component keeps its name for the error line.
        interrupts.honour_request()
        self._close_tasks()
        seconds = time.time() - self._component_started
        self.say(f"  {component:<{_WIDTH}} {self._outcome:<7} {seconds:7.1f} s")
        self.component = None

    def stopped(self, outcome: str) -> None:
        """The run ended inside a component (`failed`, `stopped`): its end line (the error line
        follows). The component is kept: the error line names it."""
        self._close_tasks()
        if self.component:
            seconds = time.time() - self._component_started
            self.say(f"  {self.component:<{_WIDTH}} {outcome:<7} {seconds:7.1f} s")

    def progress(self, event: progress.ProgressEvent) -> None:
        now = time.time()
        fields = event.fields
        task = self._tasks.get(event.task)
        if task is None:
            task = self._tasks[event.task] = _Task(event.task, fields["total"])
        task.by_worker[fields.get("worker", 0)] = (fields["done"], fields["seconds"])
        if self.live:
            self._draw_bar(task, fields)
            return
        # A validation (each epoch's end, by default) always gets its line.
        validated = "val_accuracy" in fields
        if validated or task.done >= task.total or now - task.last_plain >= _PLAIN_EVERY_S:
            task.last_plain = now
            self.say(f"  {self.component or event.task}: {self._describe(task, fields)}")

    def _describe(self, task: _Task, fields: dict) -> str:
        rate = task.rate
        eta = _duration((task.total - task.done) / rate) if rate > 0 else "?"
        if task.name == "ingest":
            return (
                f"{task.done:.0f} of {task.total:.0f} files inspected, {rate:.0f} images/s, "
                f"ETA {eta}"
            )
        return (
            f"epoch {fields['epoch']:.0f} of {fields['epochs']:.0f}, step {task.done:.0f} of "
            f"{task.total:.0f}, {fields['images_per_second']:.1f} images/s, "
            f"{_training_figures(fields)}, ETA {eta}"
        )

    def _draw_bar(self, task: _Task, fields: dict) -> None:
        from tqdm import tqdm

        if task.bar is None:
            unit = "file" if task.name == "ingest" else "step"
            task.bar = tqdm(
                total=int(task.total),
                initial=int(task.done),  # tqdm's rate and ETA count from here
                desc=f"  {self.component or task.name}",
                unit=unit,
                file=self.out,
                leave=False,
            )
        task.bar.n = int(task.done)
        if task.name == "training":
            if "val_accuracy" in fields:  # shown until the next validation
                task.validation = {key: fields[key] for key in ("val_loss", "val_accuracy")}
            task.bar.set_postfix_str(
                f"epoch {fields['epoch']:.0f}/{fields['epochs']:.0f}, "
                f"{fields['images_per_second']:.1f} images/s, "
                f"{_training_figures({**fields, **task.validation})}",
                refresh=False,
            )
        task.bar.refresh()

    def _close_tasks(self) -> None:
        for task in self._tasks.values():
            if task.bar is not None:
                task.bar.close()
        self._tasks.clear()


class _ConsoleHandler(logging.Handler):
    """Turns the log records that mean something to a user into Console calls."""

    def __init__(self, console: Console):
        super().__init__(logging.INFO)
        self._console = console

    def emit(self, record: logging.LogRecord) -> None:
        try:
            message = record.getMessage()
            event = progress.parse(message)
            if event is not None:
                self._console.progress(event)
            elif (text := progress.parse_notice(message)) is not None:
                self._console.say(f"  {self._console.component or 'run'}: {text}")
            elif found := _STARTED.match(message):
                self._console.started(found.group(1))
            elif _CACHED.match(message):
                self._console.outcome("cached")
            elif _FAILED.match(message):
                self._console.outcome("failed")
            elif found := _FINISHED.match(message):
                self._console.finished(found.group(1))
        except Exception:  # noqa: BLE001 - a console glitch must never fail the run
            self.handleError(record)


@contextlib.contextmanager
def capture(log_path: str, verbose: bool) -> Iterator[Console]:
    """For the duration: every log record and all output of this process and its children go to
    log_path (and, when verbose, live to the terminal too); yields the Console that shows the
    component lines and progress on the original stdout."""
    os.makedirs(os.path.dirname(os.path.abspath(log_path)), exist_ok=True)
    sys.stdout.flush()
    sys.stderr.flush()
    log_file = open(log_path, "a", buffering=1)  # noqa: SIM115 - closed below
    saved = {fd: os.dup(fd) for fd in (1, 2)}
    out = os.fdopen(os.dup(1), "w", buffering=1)
    console = Console(out)
    root = logging.getLogger()
    previous_level, previous_handlers = root.level, list(root.handlers)
    to_log = logging.StreamHandler(log_file)
    to_log.setFormatter(logging.Formatter(_FORMAT))
    handlers = [to_log, _ConsoleHandler(console)]
    if verbose:
        live = logging.StreamHandler(sys.stderr)
        live.setFormatter(logging.Formatter(_FORMAT))
        handlers.append(live)
    else:
        for fd in (1, 2):
            os.dup2(log_file.fileno(), fd)
    _replace_handlers(root, handlers)
    root.setLevel(logging.INFO)
    # absl's verbosity, not only the root level: a library that installs absl's handler (TF does,
    # during the Trainer) resets the root level to it, which would hide TFX's component lines.
    previous_verbosity = absl_logging.get_verbosity()
    absl_logging.set_verbosity(absl_logging.INFO)
    logging.captureWarnings(True)
    try:
        yield console
    finally:
        logging.captureWarnings(False)
        absl_logging.set_verbosity(previous_verbosity)
        _replace_handlers(root, previous_handlers)
        root.setLevel(previous_level)
        sys.stdout.flush()
        sys.stderr.flush()
        for fd, copy in saved.items():
            os.dup2(copy, fd)
            os.close(copy)
        out.close()
        log_file.close()


def _replace_handlers(logger: logging.Logger, handlers: list[logging.Handler]) -> None:
    for handler in list(logger.handlers):
        logger.removeHandler(handler)
    for handler in handlers:
        logger.addHandler(handler)
