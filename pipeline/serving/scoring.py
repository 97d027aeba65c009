"""Scoring image files with an exported model, the parts both ways of `imgpipe predict` share
(in this process, pipeline/serving/predict.py; as a Beam job, pipeline/serving/predict_beam.py):
the settings, the model's image signature, a file's examination by the ingest's own inspection,
and the rows a scored or failed batch gives."""

from __future__ import annotations

import dataclasses
import os

import numpy as np

from data_prep.reading import inspection
from data_prep.reading.image_validation import ImageLimits
from data_prep.reading.sources import SourceFile
from pipeline.predictions_file import IGNORED, REJECTED, SCORED, PredictionRow

MAX_BATCH_SIZE = 64
DEFAULT_MIN_CONFIDENCE = 0.5
INFERENCE_FAILED = "inference_failed"  # the model raised on a batch holding the file


@dataclasses.dataclass(frozen=True)
class PredictSettings:
    """How files are scored.

    Attributes:
      top_k: classes listed per file, most probable first.
      min_confidence: a top probability below it marks the prediction as low confidence.
      limits: the ingest's per-image limits, applied to every file before it is decoded.
    """

    top_k: int = 3
    min_confidence: float = DEFAULT_MIN_CONFIDENCE
    limits: ImageLimits = ImageLimits()

    def validate(self) -> PredictSettings:
        if self.top_k < 1:
            raise ValueError(f"--top-k must be at least 1, got {self.top_k}")
        if not 0.0 <= self.min_confidence <= 1.0:
            raise ValueError(f"--min-confidence must be within 0 and 1, got {self.min_confidence}")
        return self


def model_version(model_dir: str) -> str:
    """A pushed version's number (its folder's name), else the model's folder."""
    name = os.path.basename(os.path.normpath(model_dir))
    return name if name.isdigit() else os.path.abspath(model_dir)


class ImageModel:
    """The exported SavedModel's image signature: a batch of encoded JPEG or PNG images in, one
    row of class probabilities (in label-id order) out per image. Loaded with
    tf.saved_model.load, as a model server does: the signatures decode and preprocess their own
    inputs, which the bare Keras network would not."""

    def __init__(self, model_dir: str):
        import tensorflow as tf

        from components.training.export import IMAGES_SIGNATURE

        self._serve = tf.saved_model.load(model_dir).signatures[IMAGES_SIGNATURE]

    def probabilities(self, images: list[bytes]) -> np.ndarray:
        import tensorflow as tf

        return self._serve(images=tf.constant(images, tf.string))["probabilities"].numpy()


Key = tuple[str, str, str]  # (file, sha256 of its bytes, label)


def examine(source: SourceFile, limits: ImageLimits) -> tuple[Key, bytes] | PredictionRow:
    """A scorable image as (key, encoded bytes); any other file as its row."""
    outcome, accepted = inspection.examine_source(source, limits)
    label = source.label or ""
    if outcome.status == inspection.ACCEPTED:
        return (source.path, outcome.sha256, label), accepted.encoded
    status = IGNORED if outcome.status == inspection.IGNORED else REJECTED
    return PredictionRow(
        source.path, status, reason=outcome.reason, detail=outcome.detail, label=label
    )


def scored_row(
    key: Key, probabilities, label_names: tuple[str, ...], settings: PredictSettings, version: str
) -> PredictionRow:
    path, sha256, label = key
    row = np.asarray(probabilities)
    best = np.argsort(-row, kind="stable")[: settings.top_k]
    top_k = tuple((label_names[i], float(row[i])) for i in best)
    return PredictionRow(
        path,
        SCORED,
        top_k=top_k,
        low_confidence=top_k[0][1] < settings.min_confidence,
        model_version=version,
        sha256=sha256,
        label=label,
    )


def failed_rows(keys: list[Key], error: str) -> list[PredictionRow]:
    """The rows of a batch the model raised on; error as `Type: message`, its first line kept."""
    detail = error.splitlines()[0][:500]
    return [
        PredictionRow(
            path, REJECTED, reason=INFERENCE_FAILED, detail=detail, sha256=sha256, label=label
        )
        for path, sha256, label in keys
    ]
