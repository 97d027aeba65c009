"""Statistics protos of image sizes built as StatisticsGen builds them: per numeric feature a
standard histogram (10 equal-width buckets from min to max) and a quantiles histogram (10
buckets of equal counts)."""

import numpy as np
from tensorflow_metadata.proto.v0 import statistics_pb2

from data_prep.contract import features

BUCKETS = 10


def feature_statistics(name, values) -> statistics_pb2.FeatureNameStatistics:
    values = np.sort(np.asarray(values, dtype=float))
    stats = statistics_pb2.FeatureNameStatistics(type=statistics_pb2.FeatureNameStatistics.INT)
    stats.path.step.append(name)
    stats.num_stats.min, stats.num_stats.max = values[0], values[-1]
    standard = stats.num_stats.histograms.add(type=statistics_pb2.Histogram.STANDARD)
    if values[0] == values[-1]:  # TFDV writes one bucket for a single value
        standard.buckets.add(low_value=values[0], high_value=values[0], sample_count=len(values))
    else:
        edges = np.linspace(values[0], values[-1], BUCKETS + 1)
        counts, _ = np.histogram(values, edges)
        for low, high, count in zip(edges[:-1], edges[1:], counts, strict=True):
            standard.buckets.add(low_value=low, high_value=high, sample_count=count)
    quantiles = stats.num_stats.histograms.add(type=statistics_pb2.Histogram.QUANTILES)
    edges = np.quantile(values, np.linspace(0, 1, BUCKETS + 1))
    for low, high in zip(edges[:-1], edges[1:], strict=True):
        quantiles.buckets.add(low_value=low, high_value=high, sample_count=len(values) / BUCKETS)
    return stats


def size_statistics(sides) -> statistics_pb2.DatasetFeatureStatisticsList:
    """One dataset whose height and width are both `sides` (square images)."""
    listed = statistics_pb2.DatasetFeatureStatisticsList()
    dataset = listed.datasets.add(num_examples=len(sides))
    for name in (features.HEIGHT, features.WIDTH):
        dataset.features.append(feature_statistics(name, sides))
    return listed
