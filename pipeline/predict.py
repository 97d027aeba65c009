"""Classifies image files from disk with an exported model: what `imgpipe predict` runs.

Each file goes through the ingest's own validation and conversion (data_prep.image_validation),
so whatever the ingest accepts is answered the same way the model saw it in training: WebP, TIFF,
BMP, grayscale, CMYK, RGBA, EXIF-rotated photos. A file the ingest would reject gets the ingest's
reason instead of an answer; the other files are still answered.
"""

from __future__ import annotations

import dataclasses
import os

import numpy as np

from data_prep.image_validation import Accepted, ImageLimits, validate_bounded

BATCH_SIZE = 64


@dataclasses.dataclass(frozen=True)
class Prediction:
    path: str
    top: tuple[tuple[str, float], ...]  # (class name, probability), most probable first


@dataclasses.dataclass(frozen=True)
class Failure:
    path: str
    reason: str  # an image_validation.Reason, or 'unreadable'
    detail: str


def resolve_model_dir(path: str) -> str:
    """A SavedModel folder, or a Pusher destination (its newest numeric version)."""
    if os.path.isfile(os.path.join(path, "saved_model.pb")):
        return path
    versions = sorted(
        (int(name) for name in _listdir(path) if name.isdigit()),
        reverse=True,
    )
    for version in versions:
        candidate = os.path.join(path, str(version))
        if os.path.isfile(os.path.join(candidate, "saved_model.pb")):
            return candidate
    raise FileNotFoundError(f"{path} holds no SavedModel (saved_model.pb), nor numbered versions")


def _listdir(path: str) -> list[str]:
    try:
        return os.listdir(path)
    except OSError:
        return []


def predict_files(
    model_dir: str, paths: list[str], top_k: int, limits: ImageLimits | None = None
) -> list[Prediction | Failure]:
    """One result per path, in order. Raises FileNotFoundError for a folder without a model."""
    import tensorflow as tf

    from components.trainer.export import IMAGES_SIGNATURE
    from components.trainer.serving_assets import read_label_names

    if top_k < 1:
        raise ValueError(f"top_k must be at least 1, got {top_k}")
    model_dir = resolve_model_dir(model_dir)
    label_names = read_label_names(model_dir)
    serve = tf.saved_model.load(model_dir).signatures[IMAGES_SIGNATURE]
    limits = limits or ImageLimits()
    results: list[Prediction | Failure | None] = []
    pending: list[tuple[int, bytes]] = []
    for path in paths:
        checked = _check(path, limits)
        if isinstance(checked, Accepted):
            pending.append((len(results), checked.encoded))
            results.append(None)
        else:
            results.append(checked)
    for start in range(0, len(pending), BATCH_SIZE):
        chunk = pending[start : start + BATCH_SIZE]
        encoded = tf.constant([image for _, image in chunk])
        probabilities = serve(images=encoded)["probabilities"].numpy()
        for (index, _), row in zip(chunk, probabilities, strict=True):
            best = np.argsort(-row, kind="stable")[:top_k]
            top = tuple((label_names[i], float(row[i])) for i in best)
            results[index] = Prediction(paths[index], top)
    return results


def _check(path: str, limits: ImageLimits) -> Accepted | Failure:
    try:
        with open(path, "rb") as handle:
            data = handle.read()
    except OSError as error:
        return Failure(path, "unreadable", error.strerror or str(error))
    checked = validate_bounded(data, limits)
    if isinstance(checked, Accepted):
        return checked
    return Failure(path, checked.reason, checked.detail)
