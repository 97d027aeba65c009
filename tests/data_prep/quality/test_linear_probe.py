"""Out-of-fold probabilities of a logistic regression, on real handwritten digits' pixels standing
in for embeddings: every image scored by a model that never saw it."""

import numpy as np
from sklearn.datasets import load_digits

from data_prep.quality.linear_probe import out_of_fold_probabilities


def _digits(count: int = 400):
    digits = load_digits()
    return digits.data[:count].astype(np.float32), digits.target[:count].astype(np.int64)


def test_held_out_rows_are_probabilities_that_name_the_digit():
    vectors, labels = _digits()
    folds = np.arange(len(labels)) % 4
    probabilities = out_of_fold_probabilities(vectors, labels, folds, 10)
    assert probabilities.shape == (len(labels), 10)
    np.testing.assert_allclose(probabilities.sum(axis=1), 1.0, rtol=1e-6)
    assert np.mean(probabilities.argmax(axis=1) == labels) > 0.85


def test_a_wrong_label_is_scored_by_a_model_that_never_learnt_it():
    vectors, labels = _digits()
    wrong = labels.copy()
    flipped = np.arange(0, len(labels), 40)
    wrong[flipped] = (labels[flipped] + 1) % 10
    probabilities = out_of_fold_probabilities(vectors, wrong, np.arange(len(labels)) % 4, 10)
    given = probabilities[np.arange(len(labels)), wrong]
    # In-sample, a flexible model would have learnt the wrong labels; held out, it doubts them.
    assert np.median(given[flipped]) < 0.1
    assert np.median(np.delete(given, flipped)) > 0.9


def test_a_class_missing_from_a_folds_training_images_gets_no_probability_there():
    vectors, labels = _digits(200)
    keep = (labels != 9) | (np.arange(len(labels)) % 2 == 0)
    vectors, labels = vectors[keep], labels[keep]
    folds = np.where(labels == 9, 0, np.arange(len(labels)) % 2)  # every 9 in fold 0
    probabilities = out_of_fold_probabilities(vectors, labels, folds, 10)
    assert np.all(probabilities[folds == 0, 9] == 0.0)
    np.testing.assert_allclose(probabilities.sum(axis=1), 1.0, rtol=1e-6)
