"""Runs a benchmark contender in a child process; its wall and CPU time come back, and, when
asked, the peak memory of that process and all its children (Beam's workers, TFX's subprocesses),
so the peak covers the job.

Sampling memory is not free: one sample of a process's PSS reads its smaps_rollup, and finding
the tree walks /proc. Sampled often, the sampler takes a large share of a core, which slows a
job that uses every core and not a single-process loop, so it would bias the comparison. So
time is measured in runs that sample nothing, and memory in runs of their own."""

from __future__ import annotations

import atexit
import ctypes
import dataclasses
import os
import subprocess
import time

import psutil

_PR_SET_CHILD_SUBREAPER = 36  # linux/prctl.h


def reap_orphans_at_exit() -> None:
    """For a contender's own process: makes it the reaper of its orphaned descendants and waits
    for them all as it exits. A decoder's supervised child (data_prep/runtime/supervised.py)
    ends a moment after the pool child that started it, so without this its CPU time counts in
    no wait4 of the tree and run_measured misses the decoding. Linux only; elsewhere a no-op."""
    try:
        prctl = ctypes.CDLL(None, use_errno=True).prctl
    except AttributeError:
        return
    if prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0:
        # Registered before any pool exists, so it runs after their shutdown (atexit is LIFO).
        atexit.register(_reap_all)


def _reap_all() -> None:
    while True:
        try:
            os.wait()
        except ChildProcessError:
            return


@dataclasses.dataclass(frozen=True)
class Finished:
    returncode: int
    stdout: str
    seconds: float
    peak_rss_bytes: int  # 0 when memory was not sampled
    # The peak summed proportional set size: shared pages counted once over the tree. The RSS
    # sum counts a forked child's pages shared with its parent once per process, so a parent
    # and two forked children (the ingest's pool, data_prep/runtime/parallel.py) show about three
    # times the parent's memory in RSS.
    peak_pss_bytes: int
    cpu_seconds: float  # user + system of the child and the descendants it waited for
    # Every memory sample as (seconds since the epoch, summed PSS): which part of the job held
    # the peak. Empty when memory was not sampled.
    pss_samples: tuple[tuple[float, int], ...] = ()


def run_measured(command: list[str], sample_every_s: float | None = None) -> Finished:
    """`command`'s exit status, stdout (stderr discarded), wall seconds and CPU time (on a
    loaded machine, the work a contender did, which its wall time only shows when it had the
    cores to itself); with sample_every_s, the peak summed RSS and PSS of its process tree too,
    at the cost of perturbing its times (see the module's docstring)."""
    started = time.perf_counter()
    child = psutil.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    peak = peak_pss = 0
    samples = []
    wait_options = 0 if sample_every_s is None else os.WNOHANG
    while True:
        pid, status, usage = os.wait4(child.pid, wait_options)
        if pid:
            break
        try:
            tree = [p for p in (child, *child.children(recursive=True)) if p.is_running()]
            peak = max(peak, sum(p.memory_info().rss for p in tree))
            pss = sum(p.memory_full_info().pss for p in tree)
            samples.append((time.time(), pss))
            peak_pss = max(peak_pss, pss)
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
        tuple(samples),
    )
