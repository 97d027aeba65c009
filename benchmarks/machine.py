"""The machine a benchmark part ran on, recorded with its results: figures need it."""

from __future__ import annotations

import os
import platform

from data_prep.runtime.cores import usable_cores

CPUINFO = "/proc/cpuinfo"
MEMINFO = "/proc/meminfo"


def describe(cpuinfo: str = CPUINFO, meminfo: str = MEMINFO) -> dict:
    """CPU model, logical cores (all, and those this process may use), memory in GiB (None where
    /proc does not say) and the operating system."""
    return {
        "cpu": _first_value(cpuinfo, "model name") or platform.processor() or "unknown CPU",
        "cores": os.cpu_count() or 1,
        "usable_cores": usable_cores(),
        "memory_gib": _memory_gib(meminfo),
        "system": f"{platform.system()} {platform.release()}",
    }


def summary(machine: dict) -> str:
    """One line for people, e.g. 'AMD EPYC 7B13, 2 cores, 7.8 GiB memory, Linux 6.1'."""
    cores = f"{machine['cores']} cores"
    if machine.get("usable_cores", machine["cores"]) != machine["cores"]:
        cores += f" ({machine['usable_cores']} usable)"
    memory = machine.get("memory_gib")
    parts = [machine["cpu"], cores, f"{memory} GiB memory" if memory else None, machine["system"]]
    return ", ".join(part for part in parts if part)


def _first_value(path: str, key: str) -> str | None:
    try:
        with open(path) as handle:
            for line in handle:
                name, _, value = line.partition(":")
                if name.strip() == key:
                    return value.strip()
    except OSError:
        return None
    return None


def _memory_gib(path: str) -> float | None:
    total = _first_value(path, "MemTotal")  # "16314312 kB"
    if not total or not total.endswith("kB"):
        return None
    return round(int(total.split()[0]) / 2**20, 1)
