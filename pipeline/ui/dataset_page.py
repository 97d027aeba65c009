"""The dataset page of a run: every image of the span it used, read from the Examples artifact's
shards, with its class and split, the exported model's answer and its probability where the
evaluation scored it (the eval split: the EvaluationReport's kept scores) and the data health
flags (near-duplicate, likely label error, odd image kinds); filtered and paginated on the
server, thumbnails through the bounded decoder (pipeline/ui/media.py), made once per dataset.
"""

from __future__ import annotations

import dataclasses
import json
import math
import posixpath

from ml_metadata.metadata_store import metadata_store

from pipeline import lineage
from pipeline.ui import media, views

PAGE_SIZE = 200
NEAR_DUPLICATE, LABEL_ISSUE = "near-duplicate", "label issue"


@dataclasses.dataclass(frozen=True)
class Item:
    index: int  # its thumbnail's key
    path: str  # the source path recorded in the example
    label: str
    split: str
    flags: tuple[str, ...]
    predicted: str | None = None  # None: not scored (not in the evaluated split)
    confidence: float | None = None  # the answered class' probability, where recorded

    @property
    def correct(self) -> bool | None:
        """None for an image not scored or without a label."""
        if self.predicted is None or not self.label:
            return None
        return self.predicted == self.label


@dataclasses.dataclass(frozen=True)
class Gallery:
    """Images to filter, whatever listed them: a span or a predictions file."""

    items: tuple[Item, ...]
    images: dict[int, bytes]  # index -> JPEG thumbnail (absent: the bytes do not decode)

    def choices(self, attribute: str) -> list[str]:
        found = set()
        for item in self.items:
            value = getattr(item, attribute)
            found.update(value if isinstance(value, tuple) else [value])
        return sorted(value for value in found if value)


@dataclasses.dataclass(frozen=True)
class Dataset(Gallery):
    run: lineage.PipelineRun
    examples_id: int


@dataclasses.dataclass(frozen=True)
class Filters:
    label: str = ""
    split: str = ""
    predicted: str = ""
    correct: str = ""  # "yes", "no" or "" (any)
    flag: str = ""
    low: float = 0.0  # confidence range, inclusive; an item without one passes only 0..1
    high: float = 1.0

    def arguments(self) -> dict[str, object]:
        """The URL's query for these filters (the page's links keep them)."""
        names = {"label": "class"}
        return {
            names.get(field.name, field.name): getattr(self, field.name)
            for field in dataclasses.fields(self)
            if getattr(self, field.name) != field.default
        }

    def keep(self, item: Item) -> bool:
        confidence_set = (self.low, self.high) != (0.0, 1.0)
        return (
            (not self.label or item.label == self.label)
            and (not self.split or item.split == self.split)
            and (not self.predicted or item.predicted == self.predicted)
            and (not self.correct or item.correct == (self.correct == "yes"))
            and (not self.flag or self.flag in item.flags)
            and (
                not confidence_set
                or (item.confidence is not None and self.low <= item.confidence <= self.high)
            )
        )


@dataclasses.dataclass(frozen=True)
class DatasetPage:
    dataset: Gallery
    filters: Filters
    shown: tuple[Item, ...]
    matching: int
    page: int
    pages: int


def dataset(store: metadata_store.MetadataStore, run_spec: str) -> Dataset:
    """Every image of the run's span, with its evaluation answer and health flags."""
    run = views.find_run(store, run_spec)
    if run.status == "running":  # its answers and flags are still to come: shown once, complete
        raise lineage.LineageError(f"run {run.run_id} is still running; its data page follows")
    artifacts = lineage.run_artifacts(store, run)
    examples = artifacts.get("examples")
    if examples is None:
        raise lineage.LineageError(f"run {run.run_id} has no dataset")
    flags = _health_flags(artifacts.get("data_health"))
    names = run.class_names
    answers = _answers(artifacts.get("readable_evaluation"), names)
    items, images = [], {}
    for split, path, label, image in _examples(examples):
        label_name = names[label] if 0 <= label < len(names) else str(label)
        predicted, confidence = answers.get(path, (None, None))
        index = len(items)
        items.append(
            Item(index, path, label_name, split, flags.get(path, ()), predicted, confidence)
        )
        small = media.thumbnail(image)
        if small is not None:
            images[index] = small
    return Dataset(tuple(items), images, run, examples.id)


def page(found: Gallery, filters: Filters, number: int) -> DatasetPage:
    matching = [item for item in found.items if filters.keep(item)]
    pages = max(1, math.ceil(len(matching) / PAGE_SIZE))
    number = min(max(1, number), pages)
    shown = matching[(number - 1) * PAGE_SIZE : number * PAGE_SIZE]
    return DatasetPage(found, filters, tuple(shown), len(matching), number, pages)


def _examples(examples: lineage.ArtifactRecord):
    """(split, source path, label id, encoded image) of every example, split by split."""
    import tensorflow as tf

    from components.evaluation.eval_split import read_batches

    for split in json.loads(examples.properties.get("split_names", "[]")):
        files = sorted(tf.io.gfile.glob(posixpath.join(examples.uri, f"Split-{split}", "*")))
        for batch in read_batches(files) if files else ():
            rows = zip(batch.source_paths, batch.labels, batch.images.numpy(), strict=True)
            for path, label, image in rows:
                yield split, path, int(label), image


def _answers(report_artifact, names: tuple[str, ...]) -> dict[str, tuple[str, float]]:
    """The exported model's answer on every eval image: path -> (class, its probability), from
    the scores the EvaluationReport kept; empty when the run has none."""
    from components.evaluation.evaluation_report import read_scores

    if report_artifact is None:
        return {}
    try:
        scores = read_scores(report_artifact.uri)
    except OSError:  # an older report without the scores, or its files are gone
        return {}
    answered = scores.probabilities.argmax(axis=1)
    return {
        path: (names[k] if k < len(names) else str(k), float(scores.probabilities[i, k]))
        for i, (path, k) in enumerate(zip(scores.source_paths, answered, strict=True))
    }


def _health_flags(artifact) -> dict[str, tuple[str, ...]]:
    from components.validation.data_health import read_health

    health = read_health(artifact.uri) if artifact is not None else None
    if health is None:
        return {}
    flags: dict[str, list[str]] = {}
    for members in health["near_duplicates"]["members"]:
        for path in members:
            flags.setdefault(path, []).append(NEAR_DUPLICATE)
    for issue in health["label_issues"]:
        flags.setdefault(issue["path"], []).append(LABEL_ISSUE)
    for entry in health["odd_images"]["images"]:
        flags.setdefault(entry["path"], []).extend(entry["flags"])
    return {path: tuple(found) for path, found in flags.items()}
