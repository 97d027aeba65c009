"""The Beam options of the pipeline's Beam components (ImageExampleGen, StatisticsGen, Transform,
Evaluator): chosen by the input's size on the local DirectRunner, as given on any other runner.

A small input runs in this process: starting DirectRunner worker processes (each imports
TensorFlow) costs more than the work; above data_prep/runtime/running_mode.py's
IN_PROCESS_MAX_FILES, one worker process per core.
Either way TFX is told that the workers need nothing installed: by default every Beam executor
repackages the whole TFX installation as an sdist for remote workers, seconds of work
(tfx.utils.dependency_utils.make_beam_dependency_flags), which DirectRunner workers, running
in this very environment, never install (and never removes: a large folder under the system's
temp directory per executor). And Beam pickles with cloudpickle rather than its default dill
(data_prep/runtime/running_mode.py LOCAL_PICKLER says why).
"""

from __future__ import annotations

import apache_beam
from apache_beam.options.pipeline_options import PipelineOptions

from data_prep.runtime import running_mode

# One of the options TFX reads as "the workers' dependencies are provided"; the DirectRunner
# ignores it (its workers are this interpreter or its subprocesses).
LOCAL_WORKERS_NEED_NOTHING = (
    f"--sdk_container_image=apache/beam_python3.10_sdk:{apache_beam.__version__}"
)
_DEPENDENCY_OPTIONS = (
    "extra_packages",
    "setup_file",
    "requirements_file",
    "worker_harness_container_image",
    "sdk_container_image",
)


def resolve_beam_args(configured: tuple[str, ...], input_files: int) -> tuple[str, ...]:
    """`configured` as given for a runner other than the DirectRunner; for the DirectRunner, its
    running mode chosen by `input_files` and the pickler cloudpickle, unless `configured` names
    them, and TFX's repackaging off unless `configured` names the workers' dependencies."""
    options = PipelineOptions(list(configured)).get_all_options()
    if not running_mode.is_direct_runner(options.get("runner")):
        return configured
    resolved = running_mode.with_running_mode(
        configured, input_files, running_mode.IN_PROCESS_MAX_FILES
    )
    resolved = running_mode.with_local_pickler(resolved)
    if not any(options.get(name) for name in _DEPENDENCY_OPTIONS):
        resolved += (LOCAL_WORKERS_NEED_NOTHING,)
    return resolved
