"""Brightness (exposure) drift measured as image size drift is: the largest share of images on
one side of any mean brightness that differs between the span and the baseline data (the
L-infinity distance between the two empirical CDFs).

The ingest counts its images by mean brightness, one whole grey level each, per split
(`brightness_per_split` in ingest_report.json, data_prep/quality/health.py
brightness_histogram), so the distance is exact: a handful of darker images moves it by their
share, a third of the images darkened past the others by a third. TFDV computes no statistic of
an image's pixels, so the counts come from the ingest report rather than StatisticsGen.
"""

from __future__ import annotations

import numpy as np

from components.validation.size_drift import Distance

FEATURE = "brightness"
REPORT_FIELD = "brightness_per_split"


def level_distance(current: list[int], baseline: list[int]) -> float:
    """The L-infinity distance between the CDFs of two counts of images by brightness level."""
    cdfs = [np.cumsum(counts) / max(1, sum(counts)) for counts in (current, baseline)]
    return round(float(np.max(np.abs(cdfs[0] - cdfs[1]))), 6)


def brightness_distance(
    report: dict, baseline_report: dict, split: str, threshold: float
) -> Distance | None:
    """The brightness share distance between two ingest reports' split, or None when either
    counted no image of it (a report written before brightness was counted)."""
    counts = [r.get(REPORT_FIELD, {}).get(split) for r in (report, baseline_report)]
    if not all(c and sum(c) for c in counts):
        return None
    return Distance(FEATURE, level_distance(*counts), threshold)
