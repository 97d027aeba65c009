"""How many CPU cores this process may use: the one count the ingest's thread pool, the training
input pipeline's report and the TFLite interpreter size themselves by. Its own module so that the
code fingerprints of what imports it (pipeline/code_fingerprint.py) do not change with the ingest's
thread pool."""

import os


def usable_cores() -> int:
    """CPU cores this process may run on (its affinity where the OS has one, as Linux does; all
    of the machine's elsewhere, e.g. on macOS)."""
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1
