"""Training on several worker processes of this machine: the same entry point in each, with a
TF_CONFIG that names all of them (worker 0 is the chief), so that train() runs under
MultiWorkerMirroredStrategy as it would on a cluster of machines.

A process that has started TensorFlow cannot join a cluster (the strategy must exist before
TensorFlow's runtime starts), so the caller, such as the TFX Trainer inside a pipeline that has
run TensorFlow already, starts fresh processes and waits for them. Run as a program, this module
calls `--entry module:function` with the text its standard input gives: the same arguments in
every worker.

The workers' output joins the caller's standard error, except the progress and notice lines (the
chief's), which become the caller's log records, so a console shows training progress as it does
for training in the caller's own process. A worker whose caller has gone stops: the others would
train on without anyone waiting for them.
"""

from __future__ import annotations

import argparse
import importlib
import json
import logging
import os
import socket
import subprocess
import sys
import threading
import time

from data_prep.runtime import progress

HOST = "127.0.0.1"
WAIT_EVERY_S = 0.5
LOGGER = logging.getLogger(__name__)


def free_port() -> int:
    """A TCP port on HOST that nothing listens on now."""
    with socket.socket() as probe:
        probe.bind((HOST, 0))
        return probe.getsockname()[1]


def tf_configs(workers: int) -> list[dict]:
    """One TF_CONFIG per worker process, each on a free port of HOST; the first is the chief."""
    addresses = [f"{HOST}:{free_port()}" for _ in range(workers)]
    return [
        {"cluster": {"worker": addresses}, "task": {"type": "worker", "index": index}}
        for index in range(workers)
    ]


def run_workers(workers: int, entry: str, arguments: str) -> None:
    """Runs `entry` ('module:function', called with `arguments`) in `workers` fresh processes
    that train together, and waits for all of them. Their output joins this process's. When one
    fails, the others are stopped (they would wait for it for ever) and RuntimeError says which
    failed and its last line of output."""
    children = []
    for index, tf_config in enumerate(tf_configs(workers)):
        env = {**os.environ, "TF_CONFIG": json.dumps(tf_config)}
        child = subprocess.Popen(
            [sys.executable, "-m", __name__, "--entry", entry],
            stdin=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=env,
            text=True,
        )
        children.append((index, child, _Tail(child)))
        child.stdin.write(arguments)
        child.stdin.close()
    failed = None
    while failed is None and any(child.poll() is None for _, child, _ in children):
        for index, child, tail in children:
            if child.poll() not in (None, 0):
                failed = (index, child.returncode, tail)
                break
        else:
            time.sleep(WAIT_EVERY_S)
    if failed is None:
        failed = next(((i, c.returncode, t) for i, c, t in children if c.returncode), None)
    if failed is not None:
        for _, other, _ in children:
            other.kill()
        for _, other, _ in children:
            other.wait()
        index, code, tail = failed
        raise RuntimeError(
            f"training worker {index} of {workers} exited {code}: {tail.last_line()}"
        )
    for _, _, tail in children:
        tail.join()


class _Tail(threading.Thread):
    """Copies a child's stderr to this process's and keeps its last non-empty line."""

    def __init__(self, child: subprocess.Popen):
        super().__init__(daemon=True)
        self._child, self._last = child, ""
        self.start()

    def run(self) -> None:
        for line in self._child.stderr:
            if progress.parse(line) is not None or progress.parse_notice(line) is not None:
                LOGGER.info("%s", line.rstrip("\n"))
            else:
                sys.stderr.write(line)
            if line.strip():
                self._last = line.strip()

    def last_line(self) -> str:
        self.join()
        return self._last


def _stop_when_orphaned(parent: int) -> None:
    """Ends this process once `parent` is no longer its parent (killed, say): a worker left
    behind would wait in a collective for ever, or train on for nobody."""

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(WAIT_EVERY_S)
        os._exit(1)

    threading.Thread(target=watch, name="parent-watch", daemon=True).start()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--entry", required=True, help="module:function, called with stdin's text")
    args = parser.parse_args()
    # Progress and notices are log records at INFO: on standard error the caller finds them.
    logging.basicConfig(level=logging.INFO, stream=sys.stderr)
    _stop_when_orphaned(os.getppid())
    module, _, function = args.entry.partition(":")
    getattr(importlib.import_module(module), function)(sys.stdin.read())


if __name__ == "__main__":
    main()
