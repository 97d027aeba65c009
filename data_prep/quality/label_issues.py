"""Likely label errors: cleanlab's confident learning over out-of-sample probabilities.

The eval split's probabilities come from a model that never trained on those images (the split
keeps near-duplicates on one side), which is what confident learning needs: an image whose given
label the model finds unlikely, beyond the noise cleanlab estimates per class pair, is a suspect.
Suspects are listed, never removed: a person decides.
"""

from __future__ import annotations

import warnings

import numpy as np


def find_label_issues(
    labels: np.ndarray,
    probabilities: np.ndarray,
    source_paths: list[str],
    label_names: list[str],
) -> list[dict]:
    """The suspects, least likely given label first: path, given and predicted class, the
    model's confidence in its prediction and in the given label."""
    from cleanlab.filter import find_label_issues as cleanlab_find  # pandas, sklearn: on use

    if labels.size == 0:
        return []
    with warnings.catch_warnings():
        # Classes with one eval image: cleanlab warns that it may miss issues in them.
        warnings.simplefilter("ignore", UserWarning)
        # n_jobs=1: no process pool inside a pipeline component.
        ranked = cleanlab_find(
            labels, probabilities, return_indices_ranked_by="self_confidence", n_jobs=1
        )
    predicted = probabilities.argmax(axis=1)
    return [
        {
            "path": source_paths[i],
            "given": label_names[labels[i]],
            "predicted": label_names[predicted[i]],
            "confidence": float(probabilities[i, predicted[i]]),
            "given_label_probability": float(probabilities[i, labels[i]]),
        }
        for i in ranked
    ]
