"""The ModelCard artifact read back: the folder its card lies in and the card's files. No TFX
import: the lineage commands and the UI read cards without loading TensorFlow. The writer is
components/evaluation/model_card.py, with these very names."""

from __future__ import annotations

import posixpath

from ml_metadata.proto import metadata_store_pb2 as mlmd_pb2

from components import metadata_keys
from data_prep.reading import file_access

CARD_JSON = "model_card.json"
CARD_MARKDOWN = "model_card.md"
# Beside a pushed model: the folders the TFLite models and the readable evaluation are copied to.
TFLITE_DIR = "tflite"
EVALUATION_DIR = "evaluation"


def card_folder(artifact: mlmd_pb2.Artifact) -> str:
    """Where the card is: beside the pushed model when it was placed there, else the
    artifact's own folder."""
    placed = artifact.custom_properties.get(metadata_keys.PLACED_AT_PROPERTY)
    return placed.string_value if placed and placed.string_value else artifact.uri


def read_card_markdown(folder: str) -> str | None:
    """The card as Markdown, or None when the folder holds none (a cleaned pipeline root)."""
    path = posixpath.join(folder, CARD_MARKDOWN)
    if not file_access.exists(path):
        return None
    return file_access.read_bytes(path).decode()
