"""How a Beam job runs on the local DirectRunner, chosen by its number of input files: in this
process (whose threads do the per-file work, data_prep/parallel.py) up to IN_PROCESS_MAX_FILES,
one worker process per core above; and with which pickler. One rule for the ingest run alone
(`imgpipe prep`, run_ingest) and for the pipeline's Beam components (pipeline/beam_options.py).
"""

from __future__ import annotations

# Where worker processes start to pay on two cores: the ingest, the one Beam job whose per-image
# work is mostly Python (TF ops use every core in process; the ingest's threads share the GIL).
# `imgpipe prep` on photos, one process with a thread per core against two worker processes,
# taking turns, best of 2 (README, ingest speed), after the ingest's cuts of issue 16, on the
# shared machine (load 6-13): 9.3 s vs 28.3 s on 50 files, 24.9 s vs 30.4 s on 5,000, 55.5 s vs
# 58.2 s on 20,000 (CPU 36.9 s vs 50.3 s): about even here.
IN_PROCESS_MAX_FILES = 20_000
IN_PROCESS = ("--direct_running_mode=in_memory", "--direct_num_workers=1")
ONE_WORKER_PER_CORE = ("--direct_running_mode=multi_processing", "--direct_num_workers=0")


def direct_running_mode(input_files: int) -> tuple[str, ...]:
    """The DirectRunner flags for a job over input_files files."""
    return IN_PROCESS if input_files <= IN_PROCESS_MAX_FILES else ONE_WORKER_PER_CORE


def with_running_mode(beam_args: tuple[str, ...], input_files: int) -> tuple[str, ...]:
    """beam_args, then the running mode for input_files unless beam_args name one (the user's
    choice wins, and its worker count with it)."""
    if any(arg.split("=", 1)[0] == "--direct_running_mode" for arg in beam_args):
        return beam_args
    return (*beam_args, *direct_running_mode(input_files))


# Beam's own alternative to dill (SetupOptions.pickle_library); the DirectRunner's worker
# processes read it from the same options. Beam's dill wrapper resets dill's logger level around
# every pickle and unpickle, and each reset clears the cache of every logger in the process; the
# DirectRunner unpickles every DoFn and coder of a stage as it sets the stage up: 333 resets in
# an ingest of 50 files, 20% of Transform's time on 1,000 images (py-spy).
LOCAL_PICKLER = "--pickle_library=cloudpickle"


def with_local_pickler(beam_args: tuple[str, ...]) -> tuple[str, ...]:
    """beam_args, then LOCAL_PICKLER unless beam_args name a pickler."""
    if any(arg.split("=", 1)[0] == "--pickle_library" for arg in beam_args):
        return beam_args
    return (*beam_args, LOCAL_PICKLER)
