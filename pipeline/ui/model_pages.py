"""What the model pages and the run comparison show: the pushed versions with their metrics, gate
decisions and data; one version's rendered model card and downloadable files; and a table of
runs, sorted and filtered on the server, with accuracy and training curves across the runs
chosen. Computed from pipeline/lineage's run records and the files the pushed version holds.
"""

from __future__ import annotations

import dataclasses
import json
import os
import posixpath
import stat
import tarfile
from collections.abc import Callable

import markupsafe
from ml_metadata.metadata_store import metadata_store

from components.serving import serving_root
from components.serving.model_card_reader import (
    CARD_JSON,
    CARD_MARKDOWN,
    EVALUATION_DIR,
    TFLITE_DIR,
)
from components.serving.versions import served_version
from pipeline import lineage
from pipeline.ui import curves

# What the SavedModel download holds: the SavedModel's own files, not the card, TFLite or
# evaluation placed beside it.
SAVED_MODEL_PARTS = (
    "saved_model.pb",
    "fingerprint.pb",
    "keras_metadata.pb",
    "variables",
    "assets",
    "assets.extra",
)
# The training curves overlaid across compared runs: one chart per tag.
COMPARED_TAGS = ("eval/accuracy", "eval/loss", "train/loss")


def render_markdown(text: str | None) -> markupsafe.Markup:
    """Markdown (CommonMark and tables) as HTML; HTML inside the text is shown as text, never
    run, and unsafe link schemes (javascript:) are not linked."""
    from markdown_it import MarkdownIt

    if not text:
        return markupsafe.Markup("")
    parser = MarkdownIt("commonmark", {"html": False}).enable("table")
    return markupsafe.Markup(parser.render(text))  # html off: the text arrives escaped


# --- Pushed versions --------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class PushedVersion:
    model_id: int
    pushed_model_id: int
    folder: str  # the pushed version's folder
    run: lineage.PipelineRun  # the run that pushed it
    later_runs: tuple[str, ...]  # runs after it that pushed nothing new (their model: this one)

    @property
    def version(self) -> str:
        return posixpath.basename(self.folder.rstrip("/"))

    @property
    def state(self) -> str:
        return folder_state(self.folder)


def folder_state(folder: str) -> str:
    """What became of a pushed version's folder: serving (the highest version there), kept (a
    lower one), moved aside (found changed before a run), replaced by a link, or removed."""
    if "://" in folder:
        return "remote"
    if serving_root.is_real_directory(folder):
        served = served_version(os.path.dirname(folder.rstrip("/")))
        return "serving" if str(served) == os.path.basename(folder.rstrip("/")) else "kept"
    if os.path.lexists(folder):
        return "replaced by a link"
    if serving_root.is_real_directory(folder.rstrip("/") + serving_root.ASIDE_SUFFIX):
        return "moved aside"
    return "removed"


def models_view(store: metadata_store.MetadataStore) -> list[PushedVersion]:
    """Every pushed version, newest first, with the run that pushed it."""
    found: dict[int, tuple[lineage.PipelineRun, list[str]]] = {}
    for run in reversed(lineage.list_runs(store)):  # oldest first: the first holder pushed it
        if run.pushed_model_id is None or run.model_id is None:
            continue
        if run.pushed_model_id in found:
            found[run.pushed_model_id][1].append(run.run_id)
        else:
            found[run.pushed_model_id] = (run, [])
    versions = [
        PushedVersion(run.model_id, pushed_id, run.pushed_to, run, tuple(later))
        for pushed_id, (run, later) in found.items()
    ]
    return versions[::-1]


@dataclasses.dataclass(frozen=True)
class Decision:
    stage: str
    outcome: str  # passed, blessed, kept, refused, ...
    detail: str


@dataclasses.dataclass(frozen=True)
class ModelView:
    version: PushedVersion
    card: dict  # model_card.json; {} when the folder holds none
    card_html: markupsafe.Markup
    decisions: tuple[Decision, ...]
    files: dict[str, str]  # name shown and downloadable -> path inside the version folder
    confusion_png: str | None  # the files' name of the confusion matrix, when there is one
    has_saved_model: bool


def model_view(store: metadata_store.MetadataStore, model_id: int) -> ModelView:
    from components.evaluation.evaluation_report import (
        CONFUSION_PNG,  # TensorFlow: once a page asks
    )

    for version in models_view(store):
        if version.model_id == model_id:
            break
    else:
        raise lineage.LineageError(f"no pushed version of Model {model_id}; /models lists them")
    folder = version.folder
    card = _read_json(folder, CARD_JSON)
    confusion = posixpath.join(EVALUATION_DIR, CONFUSION_PNG)
    files = downloadable_files(folder, card, confusion)
    markdown = None
    if CARD_MARKDOWN in files:
        with open(os.path.join(folder, CARD_MARKDOWN), encoding="utf-8") as handle:
            markdown = handle.read()
    return ModelView(
        version=version,
        card=card,
        card_html=render_markdown(markdown),
        decisions=decisions(version.run, card),
        files=files,
        confusion_png=confusion if confusion in files else None,
        has_saved_model=regular_file_inside(folder, "saved_model.pb"),
    )


def downloadable_files(folder: str, card: dict, confusion: str) -> dict[str, str]:
    """The card, the confusion matrix and the TFLite models the card names, among the files
    of the version folder that are regular files inside it (never a link, never a name that
    leads out of it)."""
    names = [CARD_MARKDOWN, CARD_JSON, confusion]
    names += [
        posixpath.join(TFLITE_DIR, str(name))
        for name in (card.get("tflite") or {}).get("files", {}).values()
    ]
    return {name: name for name in names if regular_file_inside(folder, name)}


def regular_file_inside(folder: str, name: str) -> bool:
    """name is a regular file in the real folder `folder`, reached through no link."""
    if not serving_root.is_real_directory(folder) or os.path.isabs(name):
        return False
    real_folder = os.path.realpath(folder)
    path = os.path.join(folder, name)
    if os.path.realpath(path) != os.path.normpath(os.path.join(real_folder, name)):
        return False
    if not os.path.realpath(path).startswith(real_folder + os.sep):
        return False
    try:
        return stat.S_ISREG(os.lstat(path).st_mode)
    except OSError:
        return False


def decisions(run: lineage.PipelineRun, card: dict) -> tuple[Decision, ...]:
    """The gates a pushed version went through, each with its figures."""
    gate_detail = run.baseline_skipped or "schema, anomalies and drift within their thresholds"
    found = [Decision("data gate", "passed", gate_detail)]
    tfma = (card.get("metrics") or {}).get("tfma") or {}
    rules = "; ".join(
        f"{rule['metric']} {json.dumps({k: v for k, v in rule.items() if k != 'metric'})}"
        for rule in tfma.get("thresholds", [])
    )
    baseline = ((tfma.get("baseline") or {}).get("overall") or {}).get(
        "sparse_categorical_accuracy"
    )
    detail = "accuracy " + (f"{run.eval_accuracy:.4f}" if run.eval_accuracy is not None else "-")
    if baseline is not None:
        detail += f" against the baseline's {baseline:.4f}"
    found.append(
        Decision("Evaluator", "blessed", detail + (f"; thresholds: {rules}" if rules else ""))
    )
    check = run.serving_check or {}
    timing = (
        f"load {check['load_seconds']:.2f} s, one image p50 {check['latency_p50_ms']:.1f} ms"
        if "latency_p50_ms" in check
        else ""
    )
    found.append(Decision("serving check", "passed", timing))
    tflite = run.tflite or {}
    if "int8_accuracy_gap_points" in tflite:
        refused = tflite.get("int8_refused")
        found.append(
            Decision(
                "TFLite int8",
                "refused" if refused else "kept",
                refused or f"{tflite['int8_accuracy_gap_points']:+.2f} points below the SavedModel",
            )
        )
    return tuple(found)


def _read_json(folder: str, name: str) -> dict:
    if not regular_file_inside(folder, name):
        return {}
    with open(os.path.join(folder, name), encoding="utf-8") as handle:
        return json.load(handle)


def saved_model_archive(folder: str, output) -> None:
    """Writes the SavedModel of a pushed version folder as a gzip tar to the binary file
    `output`, under a top folder named by the version: regular files and folders only, never a
    link (nor what it points at)."""
    version = os.path.basename(folder.rstrip("/"))

    def no_links(member: tarfile.TarInfo) -> tarfile.TarInfo | None:
        return member if member.isreg() or member.isdir() else None

    with tarfile.open(fileobj=output, mode="w:gz") as archive:
        for name in SAVED_MODEL_PARTS:
            path = os.path.join(folder, name)
            if os.path.lexists(path):
                archive.add(path, arcname=os.path.join(version, name), filter=no_links)


# --- Runs compared ----------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Column:
    key: str  # the sort parameter
    title: str
    value: Callable[[lineage.PipelineRun], object]
    numeric: bool = False
    digits: int = 4


def _get(source: str, name: str):
    return lambda run: (getattr(run, source) or {}).get(name)


COLUMNS = (
    Column("run", "run", lambda run: run.run_id),
    Column("pipeline", "pipeline", lambda run: run.pipeline),
    Column("status", "status", lambda run: run.status),
    Column("span", "span", lambda run: run.span, numeric=True, digits=0),
    Column("accuracy", "eval accuracy", lambda run: run.eval_accuracy, numeric=True),
    Column("macro_f1", "macro F1", _get("evaluation", "macro_f1"), numeric=True),
    Column(
        "images_per_second",
        "training images/s",
        _get("training_performance", "images_per_second"),
        numeric=True,
        digits=1,
    ),
    Column("serving_p50", "serving p50 (ms)", _get("serving_check", "latency_p50_ms"), True, 2),
    Column("int8_gap", "int8 gap (points)", _get("tflite", "int8_accuracy_gap_points"), True, 2),
    Column("pushed", "pushed", lambda run: run.pushed_to),
)
STATUSES = ("complete", "failed", "interrupted", "running")
SETTING_SORT = "set:"  # a sort key naming a setting column: set:trainer.learning_rate
# Each run's settings as its run record has them (pipeline/lineage/diff.py's facts), without
# the --set and config file entries: the components' settings already hold what they changed.
_SETTINGS, _SETTINGS_REPEATED = "config.", ("config.set.", "config.file.")


@dataclasses.dataclass(frozen=True)
class CompareView:
    runs: tuple[lineage.PipelineRun, ...]  # the table: filtered and sorted
    total: int  # runs in the store
    sort: str
    descending: bool
    query: str
    status: str
    chosen: tuple[str, ...]  # run ids whose curves are drawn
    settings: tuple[str, ...]  # the settings whose values differ between the listed runs
    run_settings: dict[str, dict[str, object]]  # run id -> setting -> value
    accuracy: curves.Chart | None  # eval accuracy across the listed runs, oldest first
    accuracy_runs: tuple[str, ...]  # the runs of its points, in order
    charts: tuple[curves.Chart, ...]  # one per COMPARED_TAGS, a series per chosen run


def compare_view(
    store: metadata_store.MetadataStore,
    chosen: list[str],
    sort: str = "run",
    descending: bool = True,
    query: str = "",
    status: str = "",
) -> CompareView:
    """Runs whose id, name, pipeline or pushed folder contains `query` and whose status is `status`
    (any when empty), sorted by a COLUMNS key or set:<setting> (empty values last either way),
    with the settings that differ between them; the training curves of the `chosen` runs
    overlaid."""
    if status and status not in STATUSES:
        raise lineage.LineageError(f"no status {status!r}; one of {', '.join(STATUSES)}")
    every = lineage.list_runs(store)
    picked = list(
        {run.run_id: run for run in (lineage.find_run(every, s) for s in chosen)}.values()
    )
    listed = [run for run in every if _matches(run, query, status)]
    run_settings = {run.run_id: settings_of(store, run) for run in listed}
    settings = differing(run_settings)
    value = _sort_value(sort, run_settings, settings)
    present = sorted((r for r in listed if value(r) is not None), key=value, reverse=descending)
    listed = present + [r for r in listed if value(r) is None]
    listed_ids = {run.run_id for run in listed}
    by_time = [r for r in reversed(every) if r.run_id in listed_ids and r.eval_accuracy is not None]
    accuracy = curves.chart(
        "eval accuracy by run",
        {"eval accuracy": [(i, run.eval_accuracy) for i, run in enumerate(by_time)]},
        ["eval accuracy"],
        x_label="run",
        x_names=tuple(run_label(run) for run in by_time),
    )
    return CompareView(
        runs=tuple(listed),
        total=len(every),
        sort=sort,
        descending=descending,
        query=query,
        status=status,
        chosen=tuple(run.run_id for run in picked),
        settings=settings,
        run_settings=run_settings,
        accuracy=accuracy,
        accuracy_runs=tuple(run.run_id for run in by_time),
        charts=tuple(_overlaid(store, picked)),
    )


def _sort_value(sort: str, run_settings: dict, settings: tuple[str, ...]) -> Callable:
    """What a run is sorted by: a COLUMNS key's value, or set:<setting>'s value."""
    columns = {column.key: column for column in COLUMNS}
    if sort in columns:
        return columns[sort].value
    setting = sort.removeprefix(SETTING_SORT)
    if sort.startswith(SETTING_SORT) and setting in settings:
        return lambda run: _sortable(run_settings[run.run_id].get(setting))
    raise lineage.LineageError(
        f"no column {sort!r} to sort by; one of {', '.join(columns)}, "
        f"or {SETTING_SORT}<a setting that differs between the runs>"
    )


def run_label(run: lineage.PipelineRun) -> str:
    """A run as a chart names it: its id, and its name when it was given one."""
    return f"{run.run_id} ({run.name})" if run.name else run.run_id


def _matches(run: lineage.PipelineRun, query: str, status: str) -> bool:
    """Whether the run's id, name, pipeline or pushed folder contains `query` and its status
    is `status` (either ignored when empty)."""
    needle = query.strip().lower()
    texts = (run.run_id, run.name, run.pipeline, run.pushed_to)
    return (not status or run.status == status) and (
        not needle or any(needle in (text or "").lower() for text in texts)
    )


def settings_of(store: metadata_store.MetadataStore, run: lineage.PipelineRun) -> dict:
    """The run's recorded settings, setting -> value (trainer.learning_rate -> 0.001)."""
    return {
        key[len(_SETTINGS) :]: value
        for key, value in lineage.run_facts(store, run).items()
        if key.startswith(_SETTINGS) and not key.startswith(_SETTINGS_REPEATED)
    }


def differing(run_settings: dict[str, dict[str, object]]) -> tuple[str, ...]:
    """The settings whose values are not the same in every run (absent counts as a value)."""
    keys = sorted({key for settings in run_settings.values() for key in settings})
    return tuple(
        key
        for key in keys
        if len({repr(settings.get(key)) for settings in run_settings.values()}) > 1
    )


def _sortable(value) -> tuple | None:
    """Numbers before text, each in their own order; None stays None (listed last)."""
    if value is None:
        return None
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return (0, value, "")
    return (1, 0, str(value))


def _overlaid(store: metadata_store.MetadataStore, runs: list[lineage.PipelineRun]):
    """One chart per COMPARED_TAGS with a series per run (named by run_label), against epochs
    when every run's epochs are known, so runs of different lengths line up."""
    scalars = {}
    for run in runs:
        model_run = lineage.run_artifacts(store, run).get("model_run")
        scalars[run_label(run)] = curves.read_scalars(model_run.uri) if model_run else {}
    converted = {run_id: curves.in_epochs(found) for run_id, found in scalars.items()}
    if all(x_label == "epoch" for _, x_label in converted.values()):
        scalars, x_label = {run_id: found for run_id, (found, _) in converted.items()}, "epoch"
    else:
        x_label = "step"
    for tag in COMPARED_TAGS:
        per_run = {run_id: found.get(tag, []) for run_id, found in scalars.items()}
        drawn = curves.chart(tag, per_run, list(per_run), x_label)
        if drawn is not None:
            yield drawn
