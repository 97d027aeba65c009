"""Out-of-fold class probabilities from a linear model on image embeddings: cleanlab's
recommended path for images (cross-validated logistic regression on pretrained features).

One logistic regression per fold, fitted on the other folds' embeddings, scores its own fold,
so every image is scored by a model that never saw it; seconds, where training a network per
fold takes minutes.
"""

from __future__ import annotations

import numpy as np

MAX_ITERATIONS = 1000


def out_of_fold_probabilities(
    vectors: np.ndarray, labels: np.ndarray, folds: np.ndarray, classes: int
) -> np.ndarray:
    """float [n, classes]: each row from the model that held out its fold.

    vectors: float [n, d] embeddings; labels: int [n] in 0..classes-1; folds: int [n], each
    image's fold. A class absent from a fold's training images gets probability 0 there.
    """
    from sklearn.linear_model import LogisticRegression  # scipy: on use
    from sklearn.preprocessing import StandardScaler

    probabilities = np.zeros((len(labels), classes), np.float64)
    for fold in np.unique(folds):
        held = folds == fold
        scaler = StandardScaler().fit(vectors[~held])
        model = LogisticRegression(max_iter=MAX_ITERATIONS)
        model.fit(scaler.transform(vectors[~held]), labels[~held])
        probabilities[np.ix_(held, model.classes_)] = model.predict_proba(
            scaler.transform(vectors[held])
        )
    return probabilities
