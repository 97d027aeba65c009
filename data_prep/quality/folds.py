"""K folds over a whole dataset, for an audit that scores every image with a model that never
trained on it (`imgpipe audit`).

A fold is decided per near-duplicate cluster, by the key the split uses (plan.cluster_keys), so
copies of one picture never straddle a fold's training and held-out images: a copy in training
would vouch for its twin's label. Within that, each class is spread evenly over the folds (as
a stratified group k-fold), so every fold's model trains on every class.
"""

from __future__ import annotations

import collections
import hashlib


class FoldError(ValueError):
    """The data cannot make the folds asked for."""


def assign_folds(keys: dict[str, str], labels: dict[str, str], folds: int) -> dict[str, int]:
    """path -> fold in 0..folds-1.

    keys: each image's cluster key (plan.cluster_keys): images sharing a key share a fold.
    labels: each image's class name (a cluster has one: the ingest rejects mixed clusters).

    Each class's clusters go, largest first, to the fold holding the fewest of that class, then
    the fewest images; equals are ordered by a hash of the key, so the same images always get
    the same folds.
    """
    if folds < 2:
        raise FoldError(f"{folds} folds: at least 2 are needed")
    members = collections.defaultdict(list)
    for path in sorted(keys):
        members[keys[path]].append(path)
    if len(members) < folds:
        raise FoldError(
            f"{len(keys)} images in {len(members)} near-duplicate cluster(s) cannot fill "
            f"{folds} folds; use fewer folds or more images"
        )
    class_of = {key: min(labels[path] for path in paths) for key, paths in members.items()}
    clusters_per_class = collections.Counter(class_of.values())
    single = sorted(name for name, count in clusters_per_class.items() if count < 2)
    if single:
        raise FoldError(
            f"class(es) {single} have all their images in one near-duplicate cluster: the "
            "fold holding it would train without the class; add images of it"
        )
    per_class = collections.defaultdict(lambda: [0] * folds)
    totals = [0] * folds
    fold_of = {}
    order = sorted(members, key=lambda key: (class_of[key], -len(members[key]), _rank(key)))
    for key in order:
        counts = per_class[class_of[key]]
        fold = min(range(folds), key=lambda f: (counts[f], totals[f], f))
        counts[fold] += len(members[key])
        totals[fold] += len(members[key])
        fold_of.update(dict.fromkeys(members[key], fold))
    return fold_of


def _rank(key: str) -> bytes:
    return hashlib.sha256(f"fold:{key}".encode()).digest()
