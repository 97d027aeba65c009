"""Runs a benchmark contender in a child process while sampling the resident memory of that
process and all its children (Beam's workers, TFX's subprocesses), so the peak covers the job."""

from __future__ import annotations

import dataclasses
import subprocess
import time

import psutil


@dataclasses.dataclass(frozen=True)
class Finished:
    returncode: int
    stdout: str
    seconds: float
    peak_rss_bytes: int


def run_measured(command: list[str], sample_every_s: float = 0.05) -> Finished:
    """`command`'s exit status, stdout (stderr discarded), wall seconds and the peak summed RSS
    of its process tree."""
    started = time.perf_counter()
    child = psutil.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    peak = 0
    while child.poll() is None:
        try:
            tree = [child, *child.children(recursive=True)]
            peak = max(peak, sum(p.memory_info().rss for p in tree if p.is_running()))
        except psutil.Error:
            pass
        time.sleep(sample_every_s)
    seconds = time.perf_counter() - started
    return Finished(child.returncode, child.stdout.read().decode(), seconds, peak)
