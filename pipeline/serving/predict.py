"""Classifies image files with an exported model: what `imgpipe predict` runs. Fewer than
BEAM_FROM_FILES files are scored in this process (the model loaded once, no Beam imported); more
files, or any Beam option, run one Beam job (pipeline/serving/predict_beam.py) on the runners
the ingest runs on; pipeline/serving/scoring.py holds what both share.

Inputs are files, folders (every file below them) and manifests (the ingest's CSV or JSON lines,
labels optional). A file's class folder or manifest label is its label when at least one input
label is a class of the model; each labelled row then says whether the model got it right.
Each file goes through the ingest's own inspection (data_prep.reading.inspection), so whatever
the ingest accepts is answered as the model saw it in training (WebP, TIFF, BMP, grayscale,
CMYK, RGBA, EXIF-rotated photos), and a file the ingest would reject or ignore gets the
ingest's status and reason instead of an answer. Accepted images are scored in batches on the
SavedModel's image signature; a batch the model fails on is reported per file, and the other
files are still answered. Both ways write the same rows, read back from the file they wrote.
"""

from __future__ import annotations

import dataclasses
import os
import tempfile

from components.serving.versions import served_version, version_dir
from data_prep.reading import inspection
from data_prep.reading.image_validation import ImageLimits
from data_prep.reading.sources import (
    MANIFEST_EXTENSIONS,
    SourceFile,
    list_class_folders,
    read_manifest,
)
from data_prep.writing.local_files import create_exclusively
from pipeline.predictions_file import SCORED, PredictionRow, read_rows, write_rows
from pipeline.serving.scoring import (
    MAX_BATCH_SIZE,
    ImageModel,
    PredictSettings,
    examine,
    failed_rows,
    model_version,
    scored_row,
)

# Fewer files are scored in this process. Below data_prep.runtime.running_mode's
# IN_PROCESS_MAX_FILES the DirectRunner runs in this process too, so Beam would add its import
# and its job's start and nothing else; from there it spreads the files over worker processes.
BEAM_FROM_FILES = 20_000
EXPLAIN_CHUNK = 256  # images read back and explained at a time


def resolve_model_dir(path: str) -> str:
    """A SavedModel folder, or a Pusher destination (the version a server of it serves)."""
    if os.path.isfile(os.path.join(path, "saved_model.pb")):
        return path
    version = served_version(path)
    if version is None:
        raise FileNotFoundError(
            f"{path} holds no SavedModel (saved_model.pb), nor numbered versions"
        )
    return version_dir(path, version)


def list_inputs(inputs: list[str]) -> list[SourceFile]:
    """Every file to score, by absolute path (the rows are recorded in ML Metadata), in the order
    given: a file as it is, a folder's files at any depth (entries that are no readable file
    included, with their problem), a manifest's rows. A file named twice is scored once. Raises
    data_prep.reading.sources.SourceError for an empty folder or a malformed manifest."""
    sources, seen = [], set()
    for named in inputs:
        given = named if "://" in named else os.path.abspath(named)
        if os.path.isdir(given):
            found = list_class_folders(given)
        elif given.lower().endswith(MANIFEST_EXTENSIONS) and os.path.isfile(given):
            found = read_manifest(given, labelled=False)
        else:
            found = [SourceFile(given, given, None)]
        for source in found:
            if source.path not in seen:
                seen.add(source.path)
                sources.append(source)
    return sources


def score_in_process(
    sources: list[SourceFile],
    model_dir: str,
    label_names: tuple[str, ...],
    settings: PredictSettings,
    output: str,
) -> None:
    """The files examined and scored MAX_BATCH_SIZE at a time (so at most one batch of images is
    held), the model loaded once, at the first image; the rows written to output."""
    rows, model, version = [], None, model_version(model_dir)
    for start in range(0, len(sources), MAX_BATCH_SIZE):
        images = []
        for source in sources[start : start + MAX_BATCH_SIZE]:
            examined = examine(source, settings.limits)
            (rows if isinstance(examined, PredictionRow) else images).append(examined)
        if not images:
            continue
        keys, encoded = zip(*images, strict=True)
        model = model or ImageModel(model_dir)
        try:
            probabilities = model.probabilities(list(encoded))
        except Exception as error:  # noqa: BLE001  reported per file, as RunInference's
            rows += failed_rows(list(keys), f"{type(error).__name__}: {error}")
            continue
        rows += [
            scored_row(key, row, label_names, settings, version)
            for key, row in zip(keys, probabilities, strict=True)
        ]
    write_rows(rows, output)


def predict(
    inputs: list[str],
    model_dir: str,
    settings: PredictSettings,
    output: str | None = None,
    beam_args: tuple[str, ...] = (),
) -> list[PredictionRow]:
    """Scores every file of the inputs with the SavedModel in model_dir (a version folder or a
    Pusher destination): in this process below BEAM_FROM_FILES files without Beam options, else
    with Beam. Returns one row per file, sorted by file, as read back from the file written
    (output when given, .csv or .jsonl). Raises FileNotFoundError for a folder without a model,
    ValueError for bad settings, data_prep.reading.sources.SourceError for unusable inputs."""
    from components.training.serving_assets import read_label_names

    settings.validate()
    model_dir = resolve_model_dir(model_dir)
    label_names = tuple(read_label_names(model_dir))
    sources = list_inputs(inputs)
    if not any(source.label in label_names for source in sources):
        # Folders named for no class of the model (photos sorted by trip) are no labels.
        sources = [dataclasses.replace(source, label=None) for source in sources]
    with tempfile.TemporaryDirectory(prefix="imgpipe-predict-") as scratch:
        written = output or os.path.join(scratch, "predictions.jsonl")
        if len(sources) < BEAM_FROM_FILES and not beam_args:
            score_in_process(sources, model_dir, label_names, settings, written)
        else:
            from pipeline.serving.predict_beam import score_with_beam

            score_with_beam(sources, model_dir, label_names, settings, written, beam_args)
        return read_rows(written)


def write_explanations(
    rows: list[PredictionRow], model_dir: str, folder: str, limits: ImageLimits
) -> tuple[list[str], list[str]]:
    """A Grad-CAM overlay PNG (components/evaluation/gradcam.py) of each scored file's top class in
    folder, named after the file and its bytes: (paths written, paths kept). Each file is
    created new: one there already (an earlier overlay of the same bytes, or a link) is kept
    as it is. A file changed since it was scored is left out."""
    from components.evaluation.gradcam import Explainer, overlay

    explainer = Explainer(resolve_model_dir(model_dir))
    os.makedirs(folder, exist_ok=True)
    written, kept = [], []
    scored = [row for row in rows if row.status == SCORED]
    for start in range(0, len(scored), EXPLAIN_CHUNK):
        images = []
        for row in scored[start : start + EXPLAIN_CHUNK]:
            outcome, accepted = inspection.examine_source(
                SourceFile(row.file, row.file, None), limits
            )
            if accepted is not None and outcome.sha256 == row.sha256:
                images.append((row, accepted.encoded))
        class_ids = [explainer.label_names.index(row.top_class) for row, _ in images]
        explained = explainer.explain([encoded for _, encoded in images], class_ids)
        for (row, _), explanation in zip(images, explained, strict=True):
            stem = os.path.splitext(os.path.basename(row.file))[0]
            path = os.path.join(folder, f"{stem}-{row.sha256[:8]}.png")
            try:
                handle = create_exclusively(path)
            except FileExistsError:
                kept.append(path)
                continue
            with handle:
                handle.write(overlay(explanation))
            written.append(path)
    return written, kept
