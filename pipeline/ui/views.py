"""What each page shows, computed from pipeline/lineage's answers and the artifacts' own files
(the ingest report, the readable evaluation, the Trainer's event files, the model card). Plain
dataclasses, so the pages, the self-contained report and the tests read the same values.
"""

from __future__ import annotations

import collections
import dataclasses
import datetime
import json
import posixpath

from ml_metadata.metadata_store import metadata_store

from pipeline import lineage
from pipeline.ui import curves, graph_layout, media

MAX_REJECTED_PER_REASON = 60  # listed (with thumbnails) per reason; the counts cover all of them


@dataclasses.dataclass(frozen=True)
class RunRow:
    run: lineage.PipelineRun
    states: dict[str, int]  # ran / cached / failed -> how many components


@dataclasses.dataclass(frozen=True)
class TimelineBar:
    node: str
    state: str
    start: float  # seconds after the run's first component started
    seconds: float
    left: float  # share of the run's span, 0..1, where the bar starts
    width: float  # share of the run's span the bar covers


@dataclasses.dataclass(frozen=True)
class RejectedFile:
    index: int  # position in the ingest report's list (the image route's key)
    path: str
    detail: str
    has_thumbnail: bool


@dataclasses.dataclass(frozen=True)
class IngestView:
    input: str
    totals: dict
    splits: tuple[str, ...]
    per_class: dict  # class -> split -> accepted images
    rejected_by_reason: dict  # reason -> (count, listed RejectedFiles)
    ignored: tuple[str, ...]
    conversions: dict


@dataclasses.dataclass(frozen=True)
class Mistake:
    index: int
    source_path: str
    true: str
    predicted: str
    predicted_probability: float
    true_probability: float
    has_image: bool
    has_gradcam: bool  # a Grad-CAM overlay of the answered class (image kind "gradcam")


@dataclasses.dataclass(frozen=True)
class EvaluationView:
    accuracy: float
    macro_f1: float
    examples: int
    per_class: tuple[dict, ...]
    labels: tuple[str, ...]
    matrix: tuple[tuple[tuple[int, float], ...], ...]  # [true][predicted] -> (count, shade 0..1)
    most_confused: tuple[dict, ...]
    misclassified_count: int
    mistakes: tuple[Mistake, ...]  # those the report lists (the most confident first)
    folder: str


@dataclasses.dataclass(frozen=True)
class RunView:
    run: lineage.PipelineRun
    timeline: tuple[TimelineBar, ...]
    ingest: IngestView | None
    charts: tuple[curves.Chart, ...]
    evaluation: EvaluationView | None
    model_card: str | None  # model_card.md as written
    # ("rejected" | "mistake" | "gradcam", index) -> JPEG thumbnail
    images: dict[tuple[str, int], bytes]

    @property
    def lineage_model_id(self) -> int | None:
        return self.run.pushed_model_id or self.run.model_id


@dataclasses.dataclass(frozen=True)
class DiffView:
    diff: lineage.RunDiff
    sections: dict[str, tuple[lineage.Change, ...]]


@dataclasses.dataclass(frozen=True)
class LineageView:
    lineage: lineage.ModelLineage
    picture: graph_layout.GraphPicture


def runs_view(store: metadata_store.MetadataStore) -> list[RunRow]:
    return [
        RunRow(run, dict(collections.Counter(c.state for c in run.components)))
        for run in lineage.list_runs(store)
    ]


def diff_view(store: metadata_store.MetadataStore, run_a: str, run_b: str) -> DiffView:
    """What changed from the older of two runs (A) to the newer (B), whichever was named first."""
    runs = lineage.list_runs(store, metrics=False)  # newest first
    first, second = lineage.find_run(runs, run_a), lineage.find_run(runs, run_b)
    if runs.index(first) < runs.index(second):
        first, second = second, first
    diff = lineage.diff_runs(store, first.run_id, second.run_id)
    sections: dict[str, list[lineage.Change]] = {}
    for change in diff.changes:
        sections.setdefault(change.section, []).append(change)
    return DiffView(diff, {name: tuple(changes) for name, changes in sections.items()})


def find_run(store: metadata_store.MetadataStore, spec: str) -> lineage.PipelineRun:
    """A run by id, unique prefix or latest[~N], with its eval accuracy (only its own read)."""
    run = lineage.find_run(lineage.list_runs(store, metrics=False), spec)
    evaluation = lineage.run_artifacts(store, run).get("evaluation")
    if evaluation is None:
        return run
    return dataclasses.replace(run, eval_accuracy=lineage.eval_accuracy(evaluation.uri))


def run_view(store: metadata_store.MetadataStore, spec: str) -> RunView:
    run = find_run(store, spec)
    artifacts = lineage.run_artifacts(store, run)
    images: dict[tuple[str, int], bytes] = {}
    ingest = _ingest(run, images)
    model_run = artifacts.get("model_run")
    return RunView(
        run=run,
        timeline=timeline(lineage.run_executions(store, run)),
        ingest=ingest,
        charts=tuple(curves.training_charts(model_run.uri)) if model_run else (),
        evaluation=_evaluation(artifacts, images),
        model_card=_model_card(run),
        images=images,
    )


def _seconds_since(start: str, moment: str) -> float:
    parse = datetime.datetime.fromisoformat
    return (parse(moment) - parse(start)).total_seconds()


def timeline(executions: list[lineage.ExecutionRecord]) -> tuple[TimelineBar, ...]:
    """Each component's bar on the run's time axis (start times are whole seconds in ML
    Metadata's records, durations are milliseconds)."""
    if not executions:
        return ()
    first = min(e.started for e in executions)
    starts = [max(0.0, _seconds_since(first, e.started)) for e in executions]
    span = max((s + e.seconds for s, e in zip(starts, executions, strict=True)), default=0) or 1
    return tuple(
        TimelineBar(e.component, e.state, start, e.seconds, start / span, e.seconds / span)
        for start, e in zip(starts, executions, strict=True)
    )


def read_json(path: str) -> dict:
    """A JSON file's object, {} when it is not there; Beam is imported only for a URI."""
    from data_prep.reading import file_access

    if not file_access.exists(path):
        return {}
    return json.loads(file_access.read_bytes(path))


def _ingest(run: lineage.PipelineRun, images: dict) -> IngestView | None:
    report = read_json(run.ingest_report) if run.ingest_report else {}
    if not report:
        return None
    grouped: dict[str, list[RejectedFile]] = {}
    counts = collections.Counter(entry["reason"] for entry in report.get("rejected", []))
    for index, entry in enumerate(report.get("rejected", [])):
        listed = grouped.setdefault(entry["reason"], [])
        if len(listed) == MAX_REJECTED_PER_REASON:
            continue
        small = media.file_thumbnail(media.input_file(report["input"], entry["path"]))
        if small is not None:
            images[("rejected", index)] = small
        listed.append(
            RejectedFile(index, entry["path"], entry.get("detail", ""), small is not None)
        )
    per_class = report.get("accepted_per_class", {})
    return IngestView(
        input=report.get("input", ""),
        totals=report.get("totals", {}),
        splits=tuple(report.get("accepted_per_split", {})),
        per_class=per_class,
        rejected_by_reason={
            reason: (counts[reason], tuple(files)) for reason, files in sorted(grouped.items())
        },
        ignored=tuple(report.get("ignored", [])),
        conversions=report.get("conversions", {}),
    )


def confusion_cells(matrix: list[list[int]]) -> tuple[tuple[tuple[int, float], ...], ...]:
    """Each cell's count and its shade: the count over its true class's images (a row's share)."""
    rows = []
    for row in matrix:
        total = sum(row) or 1
        rows.append(tuple((count, count / total) for count in row))
    return tuple(rows)


def _evaluation(artifacts: dict, images: dict) -> EvaluationView | None:
    from components.evaluation.evaluation_report_reader import read_report

    report_artifact = artifacts.get("readable_evaluation")
    if report_artifact is None:
        return None
    report = read_report(report_artifact.uri)
    if report is None:
        return None
    listed = report.get("misclassified", [])
    found = {}
    if "examples" in artifacts and listed:
        found = eval_images(artifacts["examples"], tuple(row["source_path"] for row in listed))
    mistakes = []
    for index, row in enumerate(listed):
        if row["source_path"] in found:
            images[("mistake", index)] = found[row["source_path"]]
        overlay = None
        if row.get("gradcam"):
            overlay = media.file_thumbnail(posixpath.join(report_artifact.uri, row["gradcam"]))
        if overlay is not None:
            images[("gradcam", index)] = overlay
        mistakes.append(
            Mistake(
                index,
                row["source_path"],
                row["true"],
                row["predicted"],
                row["predicted_probability"],
                row["true_probability"],
                row["source_path"] in found,
                overlay is not None,
            )
        )
    return EvaluationView(
        accuracy=report["accuracy"],
        macro_f1=report["macro_f1"],
        examples=report["examples"],
        per_class=tuple(report["per_class"]),
        labels=tuple(report["labels"]),
        matrix=confusion_cells(report["confusion_matrix"]),
        most_confused=tuple(report["most_confused"]),
        misclassified_count=report["misclassified_count"],
        mistakes=tuple(mistakes),
        folder=report_artifact.uri,
    )


def eval_images(examples: lineage.ArtifactRecord, source_paths: tuple[str, ...]) -> dict:
    """Thumbnails of the listed examples from the Examples artifact's shards: the eval and test
    splits first (where scored examples live), the train split only if some are still missing."""
    from data_prep.reading.sources import SPLITS

    names = json.loads(examples.properties.get("split_names", "[]"))
    found: dict[str, bytes] = {}
    for split in sorted(names, key=lambda name: name == SPLITS[0]):  # SPLITS[0]: train
        missing = tuple(path for path in source_paths if path not in found)
        if not missing:
            break
        found.update(
            media.split_thumbnails(posixpath.join(examples.uri, f"Split-{split}"), missing)
        )
    return found


def _model_card(run: lineage.PipelineRun) -> str | None:
    from components.serving.model_card_reader import read_card_markdown

    return None if run.model_card is None else read_card_markdown(run.model_card)


# --- Lineage ------------------------------------------------------------------------------


def lineage_view(store: metadata_store.MetadataStore, artifact_id: int | None) -> LineageView:
    """A model's lineage (the newest pushed model's when no id is given) as a picture."""
    if artifact_id is None:
        artifact_id = lineage.latest_pushed_model(store)
    found = lineage.model_lineage(store, artifact_id)
    links = node_links(found)
    picture = graph_layout.lay_out(
        [(edge.source, edge.target, edge.key) for edge in found.edges],
        is_execution=lambda label: " #" in label,
        link_for=links.get,
    )
    return LineageView(found, picture)


def node_links(found: lineage.ModelLineage) -> dict[str, tuple[str, dict]]:
    """Each node's page: models and pushed models their lineage, datasets (and their ingest
    report) the dataset's page, executions (and what only they made) the run they ran in."""
    links: dict[str, tuple[str, dict]] = {}
    for artifact in (found.pushed_model, found.model):
        if artifact is not None:
            links[artifact.label] = ("model_lineage", {"artifact_id": artifact.id})
    dataset = found.dataset
    for artifact in (dataset.examples, dataset.ingest_report):
        if artifact is not None:
            links[artifact.label] = ("examples_lineage", {"examples_id": dataset.examples.id})
    executions = [found.pusher, found.trainer, found.transform, dataset.example_gen]
    if found.evaluation is not None:
        executions.append(found.evaluation.evaluator)
    for execution in executions:
        if execution is not None and execution.runs:
            links[execution.label] = ("run", {"run_id": execution.runs[0]})
    if found.transform_graph is not None and found.transform is not None:
        links[found.transform_graph.label] = links.get(found.transform.label)
    for edge in found.edges:  # the blessing: the run of the Evaluator that wrote it
        if edge.key == "blessing" and edge.source in links:
            links.setdefault(edge.target, links[edge.source])
    return {label: link for label, link in links.items() if link is not None}
