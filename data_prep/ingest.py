"""The ingest job: a Beam pipeline from listed files to shards, label map and ingest report.

Two passes keep it fast and memory-flat on any runner: bundles of files are inspected in
parallel (one Beam element per bundle, so Beam's per-element cost is paid per bundle, not per
image); one small plan decides dedupe, splits and shards; then each shard is written by one worker
that re-reads its files, several shards at once on each worker's pool of processes, and makes its
rows of the source index. Records travel between the stages packed (_Packed), so the driver
codes bytes, not every file's record.
"""

from __future__ import annotations

import collections
import dataclasses
import heapq
import json
import logging
import os
import pickle
import time
import uuid
import zlib

import apache_beam as beam
from apache_beam.io.filesystems import FileSystems
from apache_beam.options.pipeline_options import PipelineOptions
from apache_beam.transforms.window import GlobalWindows

from data_prep.ingest_config import IngestConfig
from data_prep.reading.inspection import inspect_sources
from data_prep.reading.sources import SourceFile, list_sources
from data_prep.runtime import parallel, progress, running_mode
from data_prep.runtime.parallel import OrderedWindow
from data_prep.writing.ingest_outputs import IngestOutputs, read_source_index
from data_prep.writing.plan import IngestPlan, ShardSpec, build_plan
from data_prep.writing.shards import write_shard

LOGGER = logging.getLogger(__name__)


class IngestFailed(RuntimeError):
    """Too many rejects or an unusable dataset; the report says which files and why."""


@dataclasses.dataclass(frozen=True)
class _Packed:
    """Many records (a bundle's files or outcomes, a shard's plan) as one deflated pickle, kept
    packed wherever they travel (Beam's coders, the pool's queues) and unpacked only in the
    process that uses them. Beam's default coder codes a list item by item, a pickle per item,
    and codes elements again to sample their size; a packed value is coded as one bytes object,
    so the driver does not pickle record by record while the children wait. Deflated, as Create
    embeds its elements in the pipeline graph, which Beam pickles again and compresses with bz2
    several times."""

    blob: bytes
    count: int  # records inside, for progress, without unpacking them

    @classmethod
    def of(cls, records: tuple) -> _Packed:
        return cls(zlib.compress(pickle.dumps(records, pickle.HIGHEST_PROTOCOL), 1), len(records))

    def unpack(self) -> tuple:
        return pickle.loads(zlib.decompress(self.blob))


def _inspect_packed(bundle: _Packed, limits) -> _Packed:
    """In a pool child: one bundle of sources -> its outcomes, packed there."""
    return _Packed.of(inspect_sources(bundle.unpack(), limits))


class _InspectBundle(beam.DoFn):
    """Inspects each bundle on the worker's pool of `workers` processes (none: in the DoFn's
    thread; data_prep/runtime/parallel.py) and outputs its outcomes. The pool goes on with the
    next bundles meanwhile (one window across the elements), so no core waits while Beam codes
    an output or hands in the next element. Reports its worker's progress after the first
    bundle and then every few seconds, so a long ingest is visibly moving without flooding the
    console."""

    def __init__(self, limits, total_files: int, workers: int):
        self._limits = limits
        self._total = total_files
        self._workers = workers
        self._run = uuid.uuid4().hex  # made once, when the pipeline is built: this ingest run

    def start_bundle(self):
        self._window = OrderedWindow(self._workers, per_worker=2)
        self._began = collections.deque()  # time.monotonic() each bundle in flight was handed in

    def process(self, bundle: _Packed):
        self._began.append(time.monotonic())
        for outcomes in self._window.submit(_inspect_packed, bundle, self._limits):
            yield self._complete(outcomes)

    def finish_bundle(self):
        for outcomes in self._window.drain():
            yield GlobalWindows.windowed_value(self._complete(outcomes))

    def _complete(self, outcomes: _Packed) -> _Packed:
        """Outcomes arrive in the order the bundles were submitted."""
        due = _INSPECTED.add(self._run, outcomes.count, self._began.popleft())
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
        return outcomes


# Files inspected in this process, per run: a progress line per worker process, whatever
# thread of it ran the bundle.
_INSPECTED = progress.ProgressCounter(every_s=5.0)


@dataclasses.dataclass(frozen=True)
class _Plan:
    """The plan as it travels between the stages: its summary (the plan without its shards'
    file lists), the side input of every writer, and each shard's ShardSpec packed, unpacked
    only by the process that writes it."""

    summary: IngestPlan
    shards: tuple[_Packed, ...]


class _PlanOutcomes(beam.CombineFn):
    """Every bundle's outcomes -> the plan (build_plan), in the combine that gathers them; the
    outcomes stay packed until the plan is built."""

    def __init__(
        self,
        config: IngestConfig,
        reference_label_map: dict[str, int],
        previous_splits: dict[str, str],
    ):
        self._config, self._reference_label_map = config, reference_label_map
        self._previous_splits = previous_splits

    def create_accumulator(self) -> list:
        return []

    def add_input(self, accumulator: list, element: _Packed) -> list:
        accumulator.append(element)
        return accumulator

    def merge_accumulators(self, accumulators) -> list:
        return [packed for accumulator in accumulators for packed in accumulator]

    def extract_output(self, accumulator: list) -> _Plan:
        outcomes = [outcome for packed in accumulator for outcome in packed.unpack()]
        plan = build_plan(outcomes, self._config, self._reference_label_map, self._previous_splits)
        return _Plan(
            dataclasses.replace(plan, shards=()),
            tuple(_Packed.of((shard,)) for shard in plan.shards),
        )

    def get_accumulator_coder(self):
        return beam.coders.PickleCoder()  # one pickle of packed values (see _Packed)


def _summary(plan: _Plan) -> IngestPlan:
    return plan.summary


def _shards_to_write(plan: _Plan):
    return () if plan.summary.failure else plan.shards


def _write_packed(
    shard: _Packed, label_names: dict[int, str], limits, examples_dir: str
) -> tuple[dict, _Packed]:
    """In a pool child: writes one shard (write_shard); returns its result and its rows of the
    source index (see write_source_index), packed."""
    (spec,) = shard.unpack()
    return (
        write_shard(spec, label_names, limits, examples_dir),
        _Packed.of(source_index_rows(spec, label_names)),
    )


class _WriteShards(beam.DoFn):
    """Writes each shard in one of the worker's pool processes, one shard per process at a time,
    and outputs its result once written: every core writes a shard of its own. Two shards per
    child in flight, so a child that finished a small shard starts the next one while the
    oldest, a larger one, is still being written."""

    def __init__(self, config: IngestConfig, outputs: IngestOutputs, workers: int):
        self._limits, self._examples_dir = config.limits, outputs.examples_dir
        self._workers = workers

    def start_bundle(self):
        self._writing = OrderedWindow(self._workers, per_worker=2)

    def process(self, shard: _Packed, summary: IngestPlan):
        label_names = {label_id: name for name, label_id in summary.label_map.items()}
        yield from self._writing.submit(
            _write_packed, shard, label_names, self._limits, self._examples_dir
        )

    def finish_bundle(self):
        for written in self._writing.drain():
            yield GlobalWindows.windowed_value(written)


def _finish(written, plan: IngestPlan, outputs: IngestOutputs) -> dict:
    """After every shard: the source index, the report, then the label map."""
    report = dict(plan.report)
    report["status"] = "failed" if plan.failure else "ok"
    report["failure"] = plan.failure
    report["shards"] = sorted((result for result, _ in written), key=lambda r: r["path"])
    if not plan.failure:
        write_source_index([rows.unpack() for _, rows in written], outputs)
    _write_json(outputs.report_path, report)
    if not plan.failure:
        _write_json(outputs.label_map_path, plan.label_map)
    return report


def source_index_rows(spec: ShardSpec, label_names: dict[int, str]) -> tuple[tuple[str, str], ...]:
    """One shard's rows of the source index: (relative path, JSON line), sorted by path."""
    rows = (
        {
            "path": planned.source.relative_path,
            "uri": planned.source.path,
            "sha256": planned.sha256,
            "split": spec.split,
            "label": label_names[planned.label_id],
            "shard": spec.relative_path,
        }
        for planned in spec.examples
    )
    return tuple(sorted((row["path"], json.dumps(row, sort_keys=True) + "\n") for row in rows))


def write_source_index(
    shard_rows: list[tuple[tuple[str, str], ...]], outputs: IngestOutputs
) -> None:
    """Every accepted image's relative path, full path, sha256, split, label and shard, sorted by
    path: tells which datasets hold an image without reading their shards (a few dozen bytes per
    image, gzip JSON lines). Each shard's writer made its rows (source_index_rows)."""
    lines = (line for _, line in heapq.merge(*shard_rows))
    with FileSystems.create(outputs.source_index_path) as handle:  # .gz: gzip by extension
        handle.write("".join(lines).encode())


def previous_splits(source_index_path: str) -> dict[str, str]:
    """The split of every image a previous ingest placed, by sha256, from its source index;
    {} for no path (a pipeline's first span)."""
    if not source_index_path:
        return {}
    return {row["sha256"]: row["split"] for row in read_source_index(source_index_path)}


def _write_json(path: str, value) -> None:
    with FileSystems.create(path) as handle:
        handle.write(json.dumps(value, indent=2, sort_keys=True).encode())


class IngestImages(beam.PTransform):
    """Files -> gzip TFRecord shards + label map + report; outputs one element: the report.

    reference_label_map: the pipeline's label ids, kept for known classes (see build_plan).
    previous_splits: the split earlier spans gave each image, by sha256, which it keeps
    (previous_splits() reads them from the previous ingest's source index).
    """

    def __init__(
        self,
        sources: list[SourceFile],
        config: IngestConfig,
        outputs: IngestOutputs,
        reference_label_map: dict[str, int] | None = None,
        previous_splits: dict[str, str] | None = None,
    ):
        super().__init__()
        self._sources, self._config, self._outputs = sources, config, outputs
        self._reference_label_map = reference_label_map or {}
        self._previous_splits = previous_splits or {}

    def expand(self, pbegin):
        size = self._config.files_per_bundle
        workers = running_mode.pool_workers(pbegin.pipeline.options)
        bundles = [
            _Packed.of(tuple(self._sources[i : i + size]))
            for i in range(0, len(self._sources), size)
        ]
        plan = (
            pbegin
            | "Bundles" >> beam.Create(bundles)  # spreads them over the workers (a reshuffle)
            | "Inspect"
            >> beam.ParDo(_InspectBundle(self._config.limits, len(self._sources), workers))
            # Without a default: there is always a bundle (list_sources refuses an empty input).
            | "Plan"
            >> beam.CombineGlobally(
                _PlanOutcomes(self._config, self._reference_label_map, self._previous_splits)
            ).without_defaults()
        )
        # The side input stays small: the plan without its per-file shard lists.
        summary = beam.pvalue.AsSingleton(plan | "Summary" >> beam.Map(_summary))
        return (
            plan
            | "Shards" >> beam.FlatMap(_shards_to_write)
            | "SpreadShards" >> beam.Reshuffle()
            | "WriteShards"
            >> beam.ParDo(_WriteShards(self._config, self._outputs, workers), summary)
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
    # with cloudpickle, unless they name their own (data_prep/runtime/running_mode.py).
    args = running_mode.ingest_running_mode(("--runner=DirectRunner", *(beam_args or ())))
    args = running_mode.with_local_pickler(args)
    options = PipelineOptions(list(args))
    started = time.monotonic()
    try:
        with beam.Pipeline(options=options) as pipeline:
            _ = pipeline | "IngestImages" >> IngestImages(sources, config, outputs)
    finally:
        parallel.release_pools()
    elapsed = time.monotonic() - started
    LOGGER.info(
        "ingest: %d files in %.1f s (%.0f files/s)", len(sources), elapsed, len(sources) / elapsed
    )
    return read_ingest_report(outputs)
