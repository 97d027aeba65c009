"""The DirectRunner's running mode: by input size for the pipeline's Beam jobs
(tests/pipeline/config/test_beam_options.py), in process at any size for run_ingest; a mode the
user names wins, with its worker count. Processes forked inside DoFns only on the local
DirectRunner in one process."""

import apache_beam as beam
import pytest
from apache_beam.options.pipeline_options import DirectOptions, PipelineOptions, SetupOptions
from apache_beam.pipeline import PipelineVisitor

from data_prep import ingest
from data_prep.ingest_config import IngestConfig
from data_prep.reading.sources import SourceFile
from data_prep.runtime.cores import usable_cores
from data_prep.runtime.running_mode import pool_workers, with_local_pickler, with_running_mode


def direct_mode(args) -> tuple[str, int]:
    """The DirectRunner's running mode and worker count that Beam reads from these args."""
    options = PipelineOptions(list(args)).view_as(DirectOptions)
    return options.direct_running_mode, options.direct_num_workers


def test_in_process_up_to_the_threshold_one_worker_per_core_above():
    assert direct_mode(with_running_mode((), 100, 100)) == ("in_memory", 1)
    assert direct_mode(with_running_mode((), 101, 100)) == ("multi_processing", 0)


def test_a_mode_the_user_names_is_kept_with_its_worker_count():
    named = ("--direct_running_mode=multi_processing", "--direct_num_workers=3")
    assert with_running_mode(named, 1, 100) == named
    assert with_running_mode(named, 10**7, 100) == named


def test_cloudpickle_unless_a_pickler_is_named():
    def pickler(args) -> str:
        return PipelineOptions(list(args)).view_as(SetupOptions).pickle_library

    assert pickler(with_local_pickler(())) == "cloudpickle"
    assert pickler(with_local_pickler(("--pickle_library=dill",))) == "dill"


class _Built(Exception):
    """Raised instead of running the job: the test only needs its options."""


def test_run_ingest_runs_in_process_at_any_size_unless_a_mode_is_named(tmp_path, monkeypatch):
    for name in ("a/1.jpg", "a/2.jpg", "b/3.jpg"):
        (tmp_path / "in" / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / "in" / name).write_bytes(b"x")
    modes = []

    def options(args):
        modes.append(direct_mode(args))
        assert PipelineOptions(args).view_as(SetupOptions).pickle_library == "cloudpickle"
        raise _Built

    monkeypatch.setattr(ingest, "PipelineOptions", options)
    config = IngestConfig(str(tmp_path / "in"))
    outputs = ingest.IngestOutputs.under(str(tmp_path / "out"))
    for beam_args in (None, ["--direct_running_mode=multi_processing", "--direct_num_workers=2"]):
        with pytest.raises(_Built):
            ingest.run_ingest(config, outputs, beam_args)
    assert modes == [("in_memory", 1), ("multi_processing", 2)]


@pytest.mark.parametrize(
    ("args", "workers"),
    [
        ([], usable_cores()),
        (["--runner=DirectRunner"], usable_cores()),
        (["--runner=direct", "--direct_running_mode=multi_threading"], usable_cores()),
        (["--runner=DirectRunner", "--direct_running_mode=multi_processing"], 0),
        (["--runner=PortableRunner", "--job_endpoint=localhost:8099"], 0),
        (["--runner=FlinkRunner"], 0),
        (["--runner=DataflowRunner"], 0),
    ],
)
def test_processes_are_forked_in_dofns_only_on_the_direct_runner_in_one_process(args, workers):
    assert pool_workers(PipelineOptions(args)) == workers


class _DoFnWorkers(PipelineVisitor):
    """The pool size of every ingest DoFn in a pipeline's graph."""

    def __init__(self):
        self.workers = {}

    def visit_transform(self, node):
        fn = getattr(node.transform, "fn", None)
        if isinstance(fn, (ingest._InspectBundle, ingest._WriteShards)):
            self.workers[type(fn).__name__] = fn._workers


@pytest.mark.parametrize(
    ("args", "workers"),
    [([], usable_cores()), (["--runner=PortableRunner", "--job_endpoint=localhost:8099"], 0)],
)
def test_the_ingest_s_dofns_take_their_pool_size_from_the_runner(args, workers):
    pipeline = beam.Pipeline(options=PipelineOptions(args))  # built, never run
    sources = [SourceFile("a/1.jpg", "/in/a/1.jpg", "a")]
    outputs = ingest.IngestOutputs.under("/nowhere")
    _ = pipeline | ingest.IngestImages(sources, IngestConfig("/in"), outputs)
    visitor = _DoFnWorkers()
    pipeline.visit(visitor)
    assert visitor.workers == {"_InspectBundle": workers, "_WriteShards": workers}
