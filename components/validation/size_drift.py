"""Image size drift measured by how many images moved, over a whole split, from StatisticsGen's
histograms: the data gate's measure where the baseline data's ingest report does not count its
images per class (a baseline imported as statistics alone, or ingested before the counts
existed); class_drift.py measures the same distance exactly, per class, everywhere else. The
distance is the largest share of images on one side of any size threshold that differs between
the span and the baseline data (the L-infinity distance between the two empirical CDFs).

Unlike a divergence between histograms, the distance is the share of images that changed: 5 odd
images among 5,000 move it by 0.001 whatever their size, while a third of the images at another
size move it by a third. TFDV's own L-infinity comparator reads categorical values only, so the
distance is computed here from the numeric histograms StatisticsGen wrote (standard and
quantiles). A histogram knows only how many values fall in each bucket, so at every bucket
boundary of either side each CDF is bounded from below and above and the distance taken is the
smallest one the histograms allow: drift is never overstated.
"""

from __future__ import annotations

from tensorflow_metadata.proto.v0 import statistics_pb2

from data_prep.contract import features

SIZE_FEATURES = (features.HEIGHT, features.WIDTH)


def _buckets(stats: statistics_pb2.FeatureNameStatistics) -> list[list[tuple[float, float, float]]]:
    """Each histogram of a numeric feature as (low, high, share of the values) buckets."""
    found = []
    for histogram in stats.num_stats.histograms:
        total = sum(b.sample_count for b in histogram.buckets)
        if total > 0:
            found.append(
                [(b.low_value, b.high_value, b.sample_count / total) for b in histogram.buckets]
            )
    if not found:
        raise ValueError(f"the statistics of '{stats.path}' hold no numeric histogram")
    return found


def _cdf_bounds(histograms, threshold: float, inclusive: bool) -> tuple[float, float]:
    """The least and the most share of values below the threshold (at or below it when
    inclusive) that every histogram allows."""
    lowest, highest = 0.0, 1.0
    for buckets in histograms:
        if inclusive:
            surely = sum(share for low, high, share in buckets if high <= threshold)
            maybe = sum(share for low, high, share in buckets if low <= threshold)
        else:
            surely = sum(share for low, high, share in buckets if high < threshold)
            maybe = sum(share for low, high, share in buckets if low < threshold)
        lowest, highest = max(lowest, surely), min(highest, maybe)
    return lowest, highest


def share_distance(
    current: statistics_pb2.FeatureNameStatistics, baseline: statistics_pb2.FeatureNameStatistics
) -> float:
    """The smallest L-infinity distance between the two features' CDFs their histograms allow."""
    sides = (_buckets(current), _buckets(baseline))
    thresholds = {
        edge for histograms in sides for buckets in histograms for b in buckets for edge in b[:2]
    }
    distance = 0.0
    for threshold in thresholds:
        for inclusive in (False, True):
            (low_a, high_a), (low_b, high_b) = (
                _cdf_bounds(histograms, threshold, inclusive) for histograms in sides
            )
            distance = max(distance, low_a - high_b, low_b - high_a)
    return min(1.0, round(distance, 6))
