"""The brightness share distance on scikit-learn's handwritten digits, counted as the ingest
counts them: a handful of darker images moves it by their share and passes the default
threshold, a third of the images darkened by 30% moves it past it."""

import numpy as np
import pytest
from PIL import Image, ImageEnhance

from components.validation.brightness_drift import brightness_distance, level_distance
from data_prep.quality import health
from pipeline.config.pipeline_config import GateConfig

THRESHOLD = GateConfig().brightness_share


@pytest.fixture(scope="module")
def digits() -> list[Image.Image]:
    """600 scans as the health benchmark writes them: 64x64 RGB, white ink on black."""
    from sklearn.datasets import load_digits

    scans = np.round(load_digits().images[:600] * (255 / 16)).astype(np.uint8)
    return [
        Image.fromarray(scan).convert("RGB").resize((64, 64), Image.Resampling.BICUBIC)
        for scan in scans
    ]


def _counts(images) -> list[int]:
    return health.brightness_histogram([health.image_signals(image) for image in images])


def _darker(images, factor: float) -> list[Image.Image]:
    return [ImageEnhance.Brightness(image).enhance(factor) for image in images]


def test_a_handful_of_darker_digits_pass_and_a_third_darkened_stop(digits):
    baseline = _counts(digits)
    assert level_distance(baseline, baseline) == 0.0
    handful = level_distance(_counts(_darker(digits[:5], 0.5) + digits[5:]), baseline)
    assert handful <= 5 / 600 + 1e-6
    third = level_distance(_counts(_darker(digits[:200], 0.7) + digits[200:]), baseline)
    assert handful < THRESHOLD < third <= 200 / 600 + 1e-6


def test_the_distance_is_the_share_of_images_moved_either_way():
    baseline = np.bincount([100] * 900, minlength=256).tolist()
    darker = np.bincount([100] * 600 + [70] * 300, minlength=256).tolist()
    assert level_distance(darker, baseline) == pytest.approx(1 / 3)
    assert level_distance(baseline, darker) == pytest.approx(1 / 3)


def test_no_distance_without_counts_on_both_sides():
    counted = {"brightness_per_split": {"train": [0] * 100 + [5] + [0] * 155}}
    assert brightness_distance(counted, {}, "train", 0.2) is None
    assert brightness_distance({}, counted, "train", 0.2) is None
    assert brightness_distance(counted, counted, "eval", 0.2) is None
    measured = brightness_distance(counted, counted, "train", 0.2)
    assert (measured.feature, measured.distance, measured.passed) == ("brightness", 0.0, True)
