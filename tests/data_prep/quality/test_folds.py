import collections
import random

import pytest

from data_prep.quality.folds import FoldError, assign_folds
from data_prep.writing.plan import cluster_keys

CLASSES = ("cat", "dog", "fox")


def dataset(clusters: int, seed: int = 0):
    """Paths, their sha256, their class and the near-duplicate clusters (1 to 4 images each)."""
    rng = random.Random(seed)
    sha256, labels, groups = {}, {}, []
    for c in range(clusters):
        label = CLASSES[c % len(CLASSES)]
        members = [f"{label}/{c}_{k}.jpg" for k in range(rng.randint(1, 4))]
        for path in members:
            sha256[path], labels[path] = f"{rng.getrandbits(256):064x}", label
        if len(members) > 1:
            groups.append(members)
    return sha256, labels, groups


def test_every_image_is_in_one_fold_and_no_cluster_straddles_folds():
    sha256, labels, groups = dataset(90)
    keys = cluster_keys(sha256, groups)
    fold_of = assign_folds(keys, labels, 5)

    assert set(fold_of) == set(sha256)  # every image, exactly once (a dict: one fold each)
    assert set(fold_of.values()) == set(range(5))
    for members in groups:
        assert len({fold_of[path] for path in members}) == 1
    # Each class spread evenly: folds differ by at most one cluster's images (at most 4).
    for label in CLASSES:
        per_fold = collections.Counter(fold_of[p] for p in fold_of if labels[p] == label)
        assert max(per_fold.values()) - min(per_fold.values()) <= 4
    assert assign_folds(keys, labels, 5) == fold_of  # the same images, the same folds


def test_the_cluster_key_is_the_smallest_hash_and_absent_members_are_left_out():
    sha256 = {"a.jpg": "f" * 64, "b.jpg": "1" * 64, "c.jpg": "5" * 64}
    keys = cluster_keys(sha256, [["a.jpg", "b.jpg", "rejected.jpg"]])
    assert keys == {"a.jpg": "1" * 64, "b.jpg": "1" * 64, "c.jpg": "5" * 64}


@pytest.mark.parametrize(
    "clusters, folds, message",
    [
        (12, 1, "at least 2"),
        (4, 5, "4 near-duplicate cluster(s) cannot fill 5 folds"),
    ],
)
def test_too_few_clusters_for_the_folds_is_a_clear_error(clusters, folds, message):
    sha256, labels, groups = dataset(clusters)
    with pytest.raises(FoldError, match=message.replace("(", r"\(").replace(")", r"\)")):
        assign_folds(cluster_keys(sha256, groups), labels, folds)


def test_a_class_in_a_single_cluster_is_refused():
    sha256, labels, groups = dataset(12)
    sha256["owl/only.jpg"], labels["owl/only.jpg"] = "0" * 64, "owl"
    with pytest.raises(FoldError, match=r"\['owl'\].*train without the class"):
        assign_folds(cluster_keys(sha256, groups), labels, 3)
