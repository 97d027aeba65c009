"""How a Beam job runs on the local DirectRunner: the pipeline's Beam components in this process
up to a number of input files, one worker process per core above
(pipeline/config/beam_options.py); the
ingest run alone (`imgpipe prep`, run_ingest) in this process at any size, its per-file work in
forked children of it (data_prep/runtime/parallel.py); and with which pickler. On any other
runner the runner's workers are the parallelism: no DoFn starts a pool of processes.
"""

from __future__ import annotations

from apache_beam.options.pipeline_options import DirectOptions, PipelineOptions, StandardOptions

from data_prep.runtime.cores import usable_cores

# The pipeline's Beam jobs, which share one set of Beam options: TF ops use every core in
# process, and each worker process imports TensorFlow, so worker processes pay off only on large
# inputs. The limit is where one process and one worker process per core broke even
# (`make bench PARTS=ingest` measures both).
IN_PROCESS_MAX_FILES = 20_000
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
    if _names_running_mode(beam_args):
        return beam_args
    return (*beam_args, *direct_running_mode(input_files, in_process_max_files))


# The ingest alone, in process at any size: its forked children (data_prep/runtime/parallel.py)
# keep the cores busy without what Beam's worker processes cost, each importing Beam and coding
# every element through the runner's data channel.
def ingest_running_mode(beam_args: tuple[str, ...]) -> tuple[str, ...]:
    """beam_args, then IN_PROCESS unless beam_args name a mode (the user's choice wins)."""
    return beam_args if _names_running_mode(beam_args) else (*beam_args, *IN_PROCESS)


def _names_running_mode(beam_args: tuple[str, ...]) -> bool:
    return any(arg.split("=", 1)[0] == "--direct_running_mode" for arg in beam_args)


# Beam's own alternative to dill (SetupOptions.pickle_library); the DirectRunner's worker
# processes read it from the same options. Beam's dill wrapper resets dill's logger level around
# every pickle and unpickle, and each reset clears the cache of every logger in the process; the
# DirectRunner unpickles every DoFn and coder of a stage as it sets the stage up, so dill costs
# a large share of small jobs' time.
LOCAL_PICKLER = "--pickle_library=cloudpickle"


def with_local_pickler(beam_args: tuple[str, ...]) -> tuple[str, ...]:
    """beam_args, then LOCAL_PICKLER unless beam_args name a pickler."""
    if any(arg.split("=", 1)[0] == "--pickle_library" for arg in beam_args):
        return beam_args
    return (*beam_args, LOCAL_PICKLER)


def is_direct_runner(runner) -> bool:
    """Beam's local DirectRunner, named or not ('DirectRunner', 'direct', its class path, the
    runner object)."""
    if runner is None:
        return True
    name = runner if isinstance(runner, str) else type(runner).__name__
    return name.rsplit(".", 1)[-1].lower() in ("direct", "directrunner", "switchingdirectrunner")


def pool_workers(options: PipelineOptions) -> int:
    """Forked children a DoFn's per-file work may use (data_prep/runtime/parallel.py): one per
    core on the local DirectRunner running in one process (in_memory or multi_threading), none
    on any other runner or running mode, whose workers are the parallelism."""
    if not is_direct_runner(options.view_as(StandardOptions).runner):
        return 0
    if options.view_as(DirectOptions).direct_running_mode == "multi_processing":
        return 0
    return usable_cores()
