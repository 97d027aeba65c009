"""The data health page of a run: near-duplicate clusters side by side, likely label errors and
odd images, each with a thumbnail of the input file (pipeline/ui/media.py)."""

from __future__ import annotations

import dataclasses

from ml_metadata.metadata_store import metadata_store

from pipeline import lineage
from pipeline.ui import media, views

MAX_LISTED = 40  # clusters, suspects and odd images shown each; health.json lists all of them


@dataclasses.dataclass(frozen=True)
class Shown:
    index: int  # of its thumbnail in HealthView.images; -1: the file no longer decodes
    path: str
    note: str = ""
    suggested: str = ""  # a likely label error's suggested class


@dataclasses.dataclass(frozen=True)
class HealthView:
    run: lineage.PipelineRun
    counts: dict
    clusters: tuple[tuple[Shown, ...], ...]
    suspects: tuple[Shown, ...]
    odd: tuple[Shown, ...]
    odd_per_class: dict[str, dict[str, int]]
    folder: str
    data_root: str  # the input the run read ("" when its ingest report is gone)
    images: dict[int, bytes]


def health_view(store: metadata_store.MetadataStore, spec: str) -> HealthView | None:
    """None when the run has no DataHealth artifact (it stopped before training)."""
    from components.validation.data_health import read_health

    run = views.find_run(store, spec)
    artifact = lineage.run_artifacts(store, run).get("data_health")
    health = read_health(artifact.uri) if artifact is not None else None
    if health is None:
        return None
    root = views.read_json(run.ingest_report).get("input", "") if run.ingest_report else ""
    images: dict[int, bytes] = {}

    def shown(path: str, note: str = "", suggested: str = "") -> Shown:
        small = media.file_thumbnail(media.input_file(root, path)) if root else None
        if small is None:
            return Shown(-1, path, note, suggested)
        images[len(images)] = small
        return Shown(len(images) - 1, path, note, suggested)

    return HealthView(
        run=run,
        counts=run.data_health or {},
        clusters=tuple(
            tuple(shown(path) for path in members)
            for members in health["near_duplicates"]["members"][:MAX_LISTED]
        ),
        suspects=tuple(
            shown(
                issue["path"],
                f"given {issue['given']}, predicted {issue['predicted']} "
                f"({issue['confidence']:.2f})",
                issue["predicted"],
            )
            for issue in health["label_issues"][:MAX_LISTED]
        ),
        odd=tuple(
            shown(entry["path"], ", ".join(entry["flags"]))
            for entry in health["odd_images"]["images"][:MAX_LISTED]
        ),
        odd_per_class=health["odd_images"]["per_class"],
        folder=artifact.uri,
        data_root=root,
        images=images,
    )
