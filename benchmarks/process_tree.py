"""Runs a benchmark contender in a child process while sampling the resident memory of that
process and all its children (Beam's workers, TFX's subprocesses), so the peak covers the job;
its CPU time comes with it."""

from __future__ import annotations

import dataclasses
import os
import subprocess
import time

import psutil


@dataclasses.dataclass(frozen=True)
class Finished:
    returncode: int
    stdout: str
    seconds: float
    peak_rss_bytes: int
    # The peak summed proportional set size: shared pages counted once over the tree. The RSS
    # sum counts a forked child's pages shared with its parent once per process, so a parent
    # and two forked children (the ingest's pool, data_prep/parallel.py) show about three
    # times the parent's memory in RSS.
    peak_pss_bytes: int
    cpu_seconds: float  # user + system of the child and the descendants it waited for


def run_measured(command: list[str], sample_every_s: float = 0.05) -> Finished:
    """`command`'s exit status, stdout (stderr discarded), wall seconds, the peak summed RSS of
    its process tree and its CPU time: on a loaded machine, the work a contender did, which its
    wall time only shows when it had the cores to itself."""
    started = time.perf_counter()
    child = psutil.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    peak = peak_pss = 0
    while True:
        pid, status, usage = os.wait4(child.pid, os.WNOHANG)
        if pid:
            break
        try:
            tree = [p for p in (child, *child.children(recursive=True)) if p.is_running()]
            peak = max(peak, sum(p.memory_info().rss for p in tree))
            peak_pss = max(peak_pss, sum(p.memory_full_info().pss for p in tree))
        except psutil.Error:
            pass
        time.sleep(sample_every_s)
    seconds = time.perf_counter() - started
    return Finished(
        os.waitstatus_to_exitcode(status),
        child.stdout.read().decode(),
        seconds,
        peak,
        peak_pss,
        usage.ru_utime + usage.ru_stime,
    )
