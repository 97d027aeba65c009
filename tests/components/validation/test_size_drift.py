"""The image size share distance on histograms built as StatisticsGen builds them: a handful of
odd images moves it by their share, a third of the images at another size by a third, and the
distance is never more than the true share of images moved."""

import numpy as np
import pytest

from components.validation.size_drift import share_distance
from tests.components.validation.size_statistics import feature_statistics


def _distance(current, baseline):
    return share_distance(
        feature_statistics("height", current), feature_statistics("height", baseline)
    )


def test_five_odd_images_among_five_thousand_move_it_by_their_share():
    baseline = [28] * 5000
    assert _distance([28] * 4995 + [56] * 5, baseline) == pytest.approx(0.001)
    assert _distance([28] * 4995 + [14] * 5, baseline) == pytest.approx(0.001)


def test_a_third_of_the_images_at_another_size_move_it_by_a_third():
    assert _distance([28] * 3500 + [56] * 1500, [28] * 5000) == pytest.approx(0.3)
    assert _distance([28] * 5000, [28] * 3500 + [56] * 1500) == pytest.approx(0.3)


def test_the_same_distribution_is_at_distance_zero_and_all_moved_at_one():
    rng = np.random.default_rng(0)
    sizes = rng.integers(200, 800, 3000)
    assert _distance(sizes, sizes) == 0
    assert _distance([28] * 100, [56] * 100) == 1


@pytest.mark.parametrize("shift", [0, 20, 60, 150])
def test_it_never_overstates_the_true_share_of_images_moved(shift):
    rng = np.random.default_rng(shift)
    current = rng.normal(500 + shift, 100, 4000).round()
    baseline = rng.normal(500, 100, 4000).round()
    grid = np.union1d(current, baseline)
    true = max(
        np.abs(
            np.searchsorted(np.sort(current), grid, side) / 4000
            - np.searchsorted(np.sort(baseline), grid, side) / 4000
        ).max()
        for side in ("left", "right")
    )
    measured = _distance(current, baseline)
    assert measured <= true + 1e-9
    assert measured >= true - 0.1  # ten buckets a histogram: within a bucket's share of it
