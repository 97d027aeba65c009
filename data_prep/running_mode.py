"""How a Beam job runs on the local DirectRunner, chosen by its number of input files: in this
process (whose threads do the per-file work, data_prep/parallel.py) up to a threshold, one worker
process per core above; and with which pickler. The ingest run alone (`imgpipe prep`,
run_ingest) has a threshold of its own; the pipeline's Beam components share one
(pipeline/beam_options.py).
"""

from __future__ import annotations

# The pipeline's Beam jobs, which share one set of Beam options: TF ops use every core in
# process, and each worker process imports TensorFlow. Set where the ingest (then its only
# mostly-Python job) broke even, `imgpipe prep` on photos, one process with a thread per core
# against two worker processes, taking turns, best of 2, on the shared machine (load 6-13): 9.3 s
# vs 28.3 s on 50 files, 24.9 s vs 30.4 s on 5,000, 55.5 s vs 58.2 s on 20,000.
IN_PROCESS_MAX_FILES = 20_000
# The ingest alone: its per-image work holds the GIL for about half its time (Pillow parses each
# file's header in Python), so its threads cannot use two cores fully, while its worker processes
# import Beam, not TensorFlow. After the cuts of issue 16, the job in one process against two
# worker processes, taking turns, best of 2, on the shared machine (load 4-7): 17.3 s vs 25.1 s
# on 5,000 photos, 30.4 s vs 28.2 s on 10,000, 42.6 s vs 32.9 s on 20,000.
INGEST_IN_PROCESS_MAX_FILES = 10_000
IN_PROCESS = ("--direct_running_mode=in_memory", "--direct_num_workers=1")
ONE_WORKER_PER_CORE = ("--direct_running_mode=multi_processing", "--direct_num_workers=0")


def direct_running_mode(input_files: int, in_process_max_files: int) -> tuple[str, ...]:
    """The DirectRunner flags for a job over input_files files."""
    return IN_PROCESS if input_files <= in_process_max_files else ONE_WORKER_PER_CORE


def with_running_mode(
    beam_args: tuple[str, ...], input_files: int, in_process_max_files: int
) -> tuple[str, ...]:
    """beam_args, then the running mode for input_files unless beam_args name one (the user's
    choice wins, and its worker count with it)."""
    if any(arg.split("=", 1)[0] == "--direct_running_mode" for arg in beam_args):
        return beam_args
    return (*beam_args, *direct_running_mode(input_files, in_process_max_files))


# Beam's own alternative to dill (SetupOptions.pickle_library); the DirectRunner's worker
# processes read it from the same options. Beam's dill wrapper resets dill's logger level around
# every pickle and unpickle, and each reset clears the cache of every logger in the process; the
# DirectRunner unpickles every DoFn and coder of a stage as it sets the stage up: 333 resets in
# an ingest of 50 files, 20% of Transform's time and 8% of the Evaluator's on 1,000 images
# (py-spy).
LOCAL_PICKLER = "--pickle_library=cloudpickle"


def with_local_pickler(beam_args: tuple[str, ...]) -> tuple[str, ...]:
    """beam_args, then LOCAL_PICKLER unless beam_args name a pickler."""
    if any(arg.split("=", 1)[0] == "--pickle_library" for arg in beam_args):
        return beam_args
    return (*beam_args, LOCAL_PICKLER)
