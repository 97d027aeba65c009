"""The Beam options the pipeline's Beam components get: in-process below the size threshold, one
worker process per core above it, anything the user names kept, other runners untouched."""

from apache_beam.options.pipeline_options import PipelineOptions, SetupOptions
from tfx.utils import dependency_utils

from data_prep.runtime.running_mode import IN_PROCESS_MAX_FILES
from pipeline.config.beam_options import resolve_beam_args
from tests.data_prep.runtime.test_running_mode import direct_mode


def test_small_inputs_run_in_this_process_large_ones_on_a_worker_per_core():
    assert direct_mode(resolve_beam_args((), IN_PROCESS_MAX_FILES)) == ("in_memory", 1)
    assert direct_mode(resolve_beam_args((), IN_PROCESS_MAX_FILES + 1)) == ("multi_processing", 0)
    named = ("--runner=DirectRunner",)
    assert direct_mode(resolve_beam_args(named, 10)) == ("in_memory", 1)


def test_a_running_mode_the_user_names_wins_whatever_the_size():
    for mode in ("multi_threading", "multi_processing", "in_memory"):
        args = (f"--direct_running_mode={mode}", "--direct_num_workers=2")
        resolved = resolve_beam_args(args, 10 if mode != "in_memory" else 10**6)
        assert resolved[: len(args)] == args
        assert direct_mode(resolved) == (mode, 2)


def _pickler(args) -> str:
    return PipelineOptions(list(args)).view_as(SetupOptions).pickle_library


def test_local_jobs_pickle_with_cloudpickle_unless_the_user_names_a_pickler():
    for files in (10, 10**6):
        assert _pickler(resolve_beam_args((), files)) == "cloudpickle"
    named = ("--pickle_library=dill",)
    assert _pickler(resolve_beam_args(named, 10)) == "dill"
    assert [a for a in resolve_beam_args(named, 10) if "pickle_library" in a] == list(named)


def test_other_runners_get_their_options_unchanged():
    for args in (
        ("--runner=DataflowRunner", "--project=p", "--region=r"),
        ("--runner=FlinkRunner", "--flink_master=host:8081"),
        ("--runner=PortableRunner", "--job_endpoint=host:8099"),
    ):
        assert resolve_beam_args(args, 10) == args
        assert resolve_beam_args(args, 10**6) == args


def test_tfx_does_not_repackage_itself_for_local_workers():
    """TFX builds an sdist of its installation for every Beam executor unless the workers'
    dependencies are named (make_beam_dependency_flags returns the args unchanged then)."""
    for files in (10, 10**6):
        resolved = list(resolve_beam_args((), files))
        assert dependency_utils.make_beam_dependency_flags(resolved) == resolved


def test_dependencies_the_user_names_are_kept_as_the_only_ones():
    args = ("--extra_package=dist/imgpipe.tar.gz",)
    resolved = resolve_beam_args(args, 10)
    assert [a for a in resolved if "sdk_container_image" in a or "extra_package" in a] == list(args)
