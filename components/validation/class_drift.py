"""Image size and brightness drift on the classes a span shares with the baseline data, measured
by how many images moved: the largest share of images on one side of any value (height, width,
mean brightness level) that differs between the two (the L-infinity distance between the
empirical CDFs, Kolmogorov-Smirnov's statistic).

The ingest counts each split's images per class and value (data_prep/writing/plan.py, the
report's CLASS_HISTOGRAMS), so the distance is exact: a handful of odd images moves it by their
share, a third of the images at another size or exposure by a third. Only the classes both spans
have are compared: a class the span adds (or drops) is the class policy's decision (data_gate.py
class_problem), and its images, however they differ, would otherwise move every distance by
their share. TFDV computes no statistic per class nor of an image's pixels, so the counts are the
ingest's rather than StatisticsGen's.
"""

from __future__ import annotations

import collections

import numpy as np

from components.validation.drift_record import ClassScope, Distance
from data_prep.contract.label_map import class_change
from data_prep.writing.ingest_outputs import CLASS_HISTOGRAMS


def counts_distance(current: dict[int, int], baseline: dict[int, int]) -> float:
    """The L-infinity distance between the CDFs of two counts of images by value."""
    values = sorted(set(current) | set(baseline))
    cdfs = [
        np.cumsum([counts.get(v, 0) for v in values]) / max(1, sum(counts.values()))
        for counts in (current, baseline)
    ]
    return round(float(np.max(np.abs(cdfs[0] - cdfs[1]))), 6)


def counts_per_class(report: dict) -> bool:
    """Whether an ingest report counts its images per class (reports written before did not)."""
    return CLASS_HISTOGRAMS in report


def pooled_counts(report: dict, split: str, classes, feature: str) -> dict[int, int]:
    """How many images of these classes in the split have each value of the feature."""
    pooled = collections.Counter()
    per_class = report[CLASS_HISTOGRAMS].get(split, {})
    for name in classes:
        for value, count in per_class.get(name, {}).get(feature, {}).items():
            pooled[int(value)] += count
    return pooled


def shared_class_distances(
    report: dict, baseline_report: dict, split: str, thresholds: dict[str, float]
) -> tuple[list[Distance], ClassScope]:
    """Each feature's distance (thresholds: feature -> threshold) between two ingest reports'
    split, over the images of the classes both label maps hold, and those classes. A feature
    either side counted no image of there is not measured."""
    current, baseline = report["label_map"], baseline_report["label_map"]
    change = class_change(baseline, current)
    scope = ClassScope(tuple(sorted(set(current) & set(baseline))), change.added, change.removed)
    found = []
    for feature, threshold in thresholds.items():
        counts = [pooled_counts(r, split, scope.shared, feature) for r in (report, baseline_report)]
        if all(counts):
            sizes = (sum(c.values()) for c in counts)
            found.append(Distance(feature, counts_distance(*counts), threshold, *sizes))
    return found, scope
