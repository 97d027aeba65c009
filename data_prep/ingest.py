"""The ingest job: a Beam pipeline from listed files to shards, label map and ingest report.

Two passes keep it fast and memory-flat on any runner: bundles of files are inspected in
parallel (one Beam element per bundle, so Beam's per-element cost is paid per bundle, not per
image); one small plan decides dedupe, splits and shards; then each shard is written by one worker
that re-reads its files, several shards at once on each worker's pool of processes.
"""

from __future__ import annotations

import collections
import dataclasses
import gzip
import json
import logging
import os
import pickle
import time
import uuid
import zlib

import apache_beam as beam
from apache_beam.io.filesystem import CompressionTypes
from apache_beam.io.filesystems import FileSystems
from apache_beam.options.pipeline_options import PipelineOptions
from apache_beam.transforms.window import GlobalWindows

from data_prep import progress, running_mode
from data_prep.config import IngestConfig
from data_prep.inspection import inspect_sources
from data_prep.parallel import OrderedWindow
from data_prep.plan import IngestPlan, build_plan
from data_prep.shards import write_shard
from data_prep.sources import SourceFile, list_sources

LOGGER = logging.getLogger(__name__)
SOURCE_INDEX_FILE = "source_index.jsonl.gz"


class IngestFailed(RuntimeError):
    """Too many rejects or an unusable dataset; the report says which files and why."""


@dataclasses.dataclass(frozen=True)
class IngestOutputs:
    examples_dir: str  # Split-<name>/ folders of gzip TFRecord shards
    label_map_path: str
    report_path: str

    @classmethod
    def under(cls, output_dir: str, examples_dir: str | None = None) -> IngestOutputs:
        """The layout `imgpipe prep` writes: shards, label map and report in one folder; or,
        with examples_dir (ImageExampleGen's two artifacts), the shards there."""
        return cls(
            examples_dir or output_dir,
            FileSystems.join(output_dir, "label_map.json"),
            FileSystems.join(output_dir, "ingest_report.json"),
        )

    @property
    def source_index_path(self) -> str:
        """Beside the report: one line per accepted image (see write_source_index)."""
        return FileSystems.join(FileSystems.split(self.report_path)[0], SOURCE_INDEX_FILE)


@dataclasses.dataclass(frozen=True)
class _Batch:
    """Many per-file records as one Beam element, coded as one deflated pickle. Beam's default
    coder codes a list item by item, a pickle per item, and codes elements again to sample their
    size: a list of 5,000 outcomes cost 9 pickles of every outcome, 0.8 s of CPU. Deflated, as
    Create embeds its elements in the pipeline graph, which Beam pickles again and compresses
    with bz2 at level 9 several times: 1.3 s of the driver's CPU for 20,000 files' paths."""

    items: tuple

    def __reduce__(self):
        packed = zlib.compress(pickle.dumps(self.items, pickle.HIGHEST_PROTOCOL), 1)
        return _unpack_batch, (packed,)


def _unpack_batch(packed: bytes) -> _Batch:
    return _Batch(pickle.loads(zlib.decompress(packed)))


class _InspectBundle(beam.DoFn):
    """Inspects each bundle on the worker's pool of processes (data_prep/parallel.py) and
    outputs its outcomes. The pool goes on with the next bundles meanwhile (one window across
    the elements), so no core waits while Beam codes an output or hands in the next element.
    Reports its worker's progress after the first bundle and then every few seconds, so a long
    ingest is visibly moving without flooding the console."""

    def __init__(self, limits, total_files: int):
        self._limits = limits
        self._total = total_files
        self._run = uuid.uuid4().hex  # made once, when the pipeline is built: this ingest run

    def start_bundle(self):
        self._window = OrderedWindow(per_worker=2)
        self._began = collections.deque()  # time.monotonic() each bundle in flight was handed in

    def process(self, bundle: _Batch):
        self._began.append(time.monotonic())
        for outcomes in self._window.submit(inspect_sources, bundle.items, self._limits):
            yield self._complete(outcomes)

    def finish_bundle(self):
        for outcomes in self._window.drain():
            yield GlobalWindows.windowed_value(self._complete(outcomes))

    def _complete(self, outcomes: tuple) -> _Batch:
        """Outcomes arrive in the order the bundles were submitted."""
        due = _INSPECTED.add(self._run, len(outcomes), self._began.popleft())
        if due:
            done, seconds = due
            progress.report(
                LOGGER,
                "ingest",
                done=done,
                total=self._total,
                seconds=seconds,
                worker=os.getpid(),
            )
        return _Batch(outcomes)


# Files inspected in this process, per run: a progress line per worker process, whatever
# thread of it ran the bundle.
_INSPECTED = progress.ProgressCounter(every_s=5.0)


class _PlanOutcomes(beam.CombineFn):
    """Every bundle's outcomes -> the plan (build_plan), in the combine that gathers them."""

    def __init__(self, config: IngestConfig, reference_label_map: dict[str, int]):
        self._config, self._reference_label_map = config, reference_label_map

    def create_accumulator(self) -> list:
        return []

    def add_input(self, accumulator: list, element: _Batch) -> list:
        accumulator.extend(element.items)
        return accumulator

    def merge_accumulators(self, accumulators) -> list:
        return [item for accumulator in accumulators for item in accumulator]

    def extract_output(self, accumulator: list) -> IngestPlan:
        return build_plan(accumulator, self._config, self._reference_label_map)

    def get_accumulator_coder(self):
        return beam.coders.PickleCoder()  # one pickle, not one per outcome (see _Batch)


def _without_shards(plan: IngestPlan) -> IngestPlan:
    return dataclasses.replace(plan, shards=())


def _shards_to_write(plan: IngestPlan):
    return () if plan.failure else plan.shards


class _WriteShards(beam.DoFn):
    """Writes each shard in one of the worker's pool processes, one shard per process at a time,
    and outputs its result (write_shard's) once written: every core writes a shard of its own."""

    def __init__(self, config: IngestConfig, outputs: IngestOutputs):
        self._limits, self._examples_dir = config.limits, outputs.examples_dir

    def start_bundle(self):
        self._writing = OrderedWindow(per_worker=1)

    def process(self, spec, summary: IngestPlan):
        label_names = {label_id: name for name, label_id in summary.label_map.items()}
        yield from self._writing.submit(
            write_shard, spec, label_names, self._limits, self._examples_dir
        )

    def finish_bundle(self):
        for result in self._writing.drain():
            yield GlobalWindows.windowed_value(result)


def _finish(shard_results, plan: IngestPlan, outputs: IngestOutputs) -> dict:
    report = dict(plan.report)
    report["status"] = "failed" if plan.failure else "ok"
    report["failure"] = plan.failure
    report["shards"] = sorted(shard_results, key=lambda result: result["path"])
    _write_json(outputs.report_path, report)
    if not plan.failure:
        _write_json(outputs.label_map_path, plan.label_map)
    return report


def write_source_index(plan: IngestPlan, outputs: IngestOutputs) -> None:
    """Every accepted image's relative path, full path, sha256, split, label and shard, sorted by
    path: tells which datasets hold an image without reading their shards (a few dozen bytes per
    image, gzip JSON lines)."""
    if plan.failure:
        return
    names = {label_id: name for name, label_id in plan.label_map.items()}
    rows = sorted(
        (
            {
                "path": planned.source.relative_path,
                "uri": planned.source.path,
                "sha256": planned.sha256,
                "split": shard.split,
                "label": names[planned.label_id],
                "shard": shard.relative_path,
            }
            for shard in plan.shards
            for planned in shard.examples
        ),
        key=lambda row: row["path"],
    )
    with FileSystems.create(outputs.source_index_path) as handle:  # .gz: gzip by extension
        handle.write("".join(json.dumps(row, sort_keys=True) + "\n" for row in rows).encode())


def read_source_index(path: str) -> list[dict]:
    """The rows write_source_index wrote."""
    with FileSystems.open(path, compression_type=CompressionTypes.UNCOMPRESSED) as handle:
        text = gzip.decompress(handle.read()).decode()
    return [json.loads(line) for line in text.splitlines()]


def _write_json(path: str, value) -> None:
    with FileSystems.create(path) as handle:
        handle.write(json.dumps(value, indent=2, sort_keys=True).encode())


class IngestImages(beam.PTransform):
    """Files -> gzip TFRecord shards + label map + report; outputs one element: the report.

    reference_label_map: the pipeline's label ids, kept for known classes (see build_plan).
    """

    def __init__(
        self,
        sources: list[SourceFile],
        config: IngestConfig,
        outputs: IngestOutputs,
        reference_label_map: dict[str, int] | None = None,
    ):
        super().__init__()
        self._sources, self._config, self._outputs = sources, config, outputs
        self._reference_label_map = reference_label_map or {}

    def expand(self, pbegin):
        size = self._config.files_per_bundle
        bundles = [
            _Batch(tuple(self._sources[i : i + size])) for i in range(0, len(self._sources), size)
        ]
        plan = (
            pbegin
            | "Bundles" >> beam.Create(bundles)  # spreads them over the workers (a reshuffle)
            | "Inspect" >> beam.ParDo(_InspectBundle(self._config.limits, len(self._sources)))
            # Without a default: there is always a bundle (list_sources refuses an empty input).
            | "Plan"
            >> beam.CombineGlobally(
                _PlanOutcomes(self._config, self._reference_label_map)
            ).without_defaults()
        )
        # The side input stays small: the plan without its per-file shard lists.
        summary = beam.pvalue.AsSingleton(plan | "Summary" >> beam.Map(_without_shards))
        _ = plan | "SourceIndex" >> beam.Map(write_source_index, self._outputs)
        return (
            plan
            | "Shards" >> beam.FlatMap(_shards_to_write)
            | "SpreadShards" >> beam.Reshuffle()
            | "WriteShards" >> beam.ParDo(_WriteShards(self._config, self._outputs), summary)
            | "ShardResults" >> beam.combiners.ToList()
            | "Report" >> beam.Map(_finish, summary, self._outputs)
        )


def clear_previous_output(outputs: IngestOutputs) -> None:
    """Removes shards and files of an earlier run so stale shards can never mix into this one."""
    stale = [
        metadata.path
        for metadata in FileSystems.match([FileSystems.join(outputs.examples_dir, "Split-*/*")])[
            0
        ].metadata_list
    ] + [
        path
        for path in (outputs.label_map_path, outputs.report_path, outputs.source_index_path)
        if FileSystems.exists(path)
    ]
    if stale:
        FileSystems.delete(stale)


def prepare_ingest(config: IngestConfig, outputs: IngestOutputs) -> list[SourceFile]:
    """Before any Beam work: checks the config, lists the input, clears an earlier run's output."""
    config.validate()
    sources = list_sources(config.input)
    LOGGER.info("ingest: %d files found under %s", len(sources), config.input)
    clear_previous_output(outputs)
    return sources


def read_ingest_report(outputs: IngestOutputs) -> dict:
    """Reads the report the job wrote; raises IngestFailed when the data made no usable dataset."""
    with FileSystems.open(outputs.report_path) as handle:
        report = json.load(handle)
    if report["failure"]:
        raise IngestFailed(f"{report['failure']} (report: {outputs.report_path})")
    return report


def run_ingest(
    config: IngestConfig, outputs: IngestOutputs, beam_args: list[str] | None = None
) -> dict:
    """Runs the ingest as its own Beam pipeline; returns the ingest report.

    Raises IngestFailed (after writing the report) when the data cannot make a usable dataset.
    """
    sources = prepare_ingest(config, outputs)
    # The local DirectRunner unless beam_args name a runner (a later flag wins), in process and
    # with cloudpickle, unless they name their own (data_prep/running_mode.py).
    args = running_mode.ingest_running_mode(("--runner=DirectRunner", *(beam_args or ())))
    args = running_mode.with_local_pickler(args)
    options = PipelineOptions(list(args))
    started = time.monotonic()
    with beam.Pipeline(options=options) as pipeline:
        _ = pipeline | "IngestImages" >> IngestImages(sources, config, outputs)
    elapsed = time.monotonic() - started
    LOGGER.info(
        "ingest: %d files in %.1f s (%.0f files/s)", len(sources), elapsed, len(sources) / elapsed
    )
    return read_ingest_report(outputs)
