"""The ModelCard artifact read back: the folder its card lies in and the card's files. No TFX
import: the lineage commands and the UI read cards without loading TensorFlow. The writer is
components/serving/model_card.py, with these very names."""

from __future__ import annotations

import posixpath

from ml_metadata.proto import metadata_store_pb2 as mlmd_pb2

from data_prep.reading import file_access

CARD_JSON = "model_card.json"
CARD_MARKDOWN = "model_card.md"
# In the card's folder, and so beside a pushed model: the TFLite models and the readable evaluation.
TFLITE_DIR = "tflite"
EVALUATION_DIR = "evaluation"


def card_folder(artifact: mlmd_pb2.Artifact, pushed_to: str | None) -> str:
    """Where the card is: in the version folder of the push that carried it (pushed_to), else
    in the artifact's own folder."""
    return pushed_to or artifact.uri


def read_card_markdown(folder: str) -> str | None:
    """The card as Markdown, or None when the folder holds none (a cleaned pipeline root)."""
    path = posixpath.join(folder, CARD_MARKDOWN)
    if not file_access.exists(path):
        return None
    return file_access.read_bytes(path).decode()
