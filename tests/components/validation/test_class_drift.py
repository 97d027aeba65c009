"""Image size and brightness drift on scikit-learn's handwritten digits, counted as the ingest
counts them: a class the span adds, however dark or large its images, moves no distance, as the
class policy decides on it; a third of the shared classes' images darker or at another size still
stops the span, and a handful of them does not."""

import numpy as np
import pytest
from PIL import Image, ImageEnhance

from components.validation.class_drift import (
    counts_distance,
    pooled_counts,
    shared_class_distances,
)
from data_prep.quality import health
from data_prep.reading.inspection import ACCEPTED, FileOutcome
from data_prep.reading.sources import SourceFile
from data_prep.writing.ingest_outputs import BRIGHTNESS, CLASS_HISTOGRAMS
from data_prep.writing.plan import class_histograms
from pipeline.config.pipeline_config import GateConfig

GATE = GateConfig()
THRESHOLDS = {"height": GATE.image_size_share, "width": GATE.image_size_share}
THRESHOLDS[BRIGHTNESS] = GATE.brightness_share
SHARED = ("0", "1", "2")
NEW = "3"


@pytest.fixture(scope="module")
def digits() -> dict[str, list[Image.Image]]:
    """The scans of digits 0 to 3 as the health benchmark writes them: 64x64 RGB, white ink on
    black; about 180 a class."""
    from sklearn.datasets import load_digits

    loaded = load_digits()
    scans = np.round(loaded.images * (255 / 16)).astype(np.uint8)
    return {
        str(digit): [
            Image.fromarray(scan).convert("RGB").resize((64, 64), Image.Resampling.BICUBIC)
            for scan, target in zip(scans, loaded.target, strict=True)
            if target == digit
        ]
        for digit in range(4)
    }


def _report(images_by_class: dict[str, list[Image.Image]]) -> dict:
    """The label map and counts per class an ingest report holds, of a train split of these."""
    outcomes = [
        FileOutcome(
            SourceFile(f"{label}/{i}.png", f"/in/{label}/{i}.png", label),
            ACCEPTED,
            height=image.height,
            width=image.width,
            signals=health.image_signals(image),
        )
        for label, images in images_by_class.items()
        for i, image in enumerate(images)
    ]
    label_map = {label: i for i, label in enumerate(sorted(images_by_class))}
    return {"label_map": label_map, CLASS_HISTOGRAMS: class_histograms({"train": outcomes})}


def _halves(digits):
    """Every other scan of each shared class (the baseline data), and the others (the span's)."""
    return [{label: digits[label][first::2] for label in SHARED} for first in (0, 1)]


def _changed(images, change, share):
    """The images with the first `share` of them changed."""
    count = round(len(images) * share)
    return [change(image) for image in images[:count]] + images[count:]


def _darker(factor):
    return lambda image: ImageEnhance.Brightness(image).enhance(factor)


def _larger(image):
    return image.resize((96, 96), Image.Resampling.BICUBIC)


def _distances(report, baseline_report):
    found, scope = shared_class_distances(report, baseline_report, "train", THRESHOLDS)
    return {d.feature: d for d in found}, scope


def _whole_split(report, baseline_report, feature):
    """The distance over every class of the split, as the gate measured before."""
    return counts_distance(
        *(pooled_counts(r, "train", r["label_map"], feature) for r in (report, baseline_report))
    )


def test_a_new_class_unlike_the_others_moves_no_distance(digits):
    baseline, span = _halves(digits)
    # The new class's images darker by half and larger than every other: 0.4 of the span's
    # images, which over the whole split would stop it on each feature.
    odd = [_larger(_darker(0.5)(image)) for image in digits[NEW]]
    report, baseline_report = _report({**span, NEW: odd}), _report(baseline)
    for feature in THRESHOLDS:
        assert _whole_split(report, baseline_report, feature) > THRESHOLDS[feature]
    measured, scope = _distances(report, baseline_report)
    assert (scope.shared, scope.new, scope.gone) == (SHARED, (NEW,), ())
    assert scope.describe() == "on 3 shared classes; 1 new class not compared"
    without_new, _ = _distances(_report(span), baseline_report)
    assert measured == without_new  # the new class counted nowhere
    assert set(measured) == set(THRESHOLDS) and all(d.passed for d in measured.values())
    assert measured["height"].distance == measured["width"].distance == 0.0
    assert measured[BRIGHTNESS].distance < 0.1  # two halves of the same writers: sampling noise


def test_a_third_of_the_shared_classes_darker_or_larger_stops_and_a_handful_does_not(digits):
    baseline, span = _halves(digits)
    baseline_report = _report(baseline)
    new_class = {NEW: digits[NEW]}

    def measured(change, share):
        changed = {label: _changed(images, change, share) for label, images in span.items()}
        return _distances(_report({**changed, **new_class}), baseline_report)[0]

    noise = measured(_darker(0.7), 0)[BRIGHTNESS].distance
    darker = measured(_darker(0.7), 1 / 3)
    # At most the share changed plus the halves' own distance (the triangle inequality).
    assert not darker[BRIGHTNESS].passed and darker[BRIGHTNESS].distance <= 1 / 3 + noise
    larger = measured(_larger, 1 / 3)
    for side in ("height", "width"):
        assert not larger[side].passed
        assert larger[side].distance == pytest.approx(1 / 3, abs=0.01)
    handful = measured(lambda image: _larger(_darker(0.5)(image)), 0.02)
    assert all(d.passed for d in handful.values())
    assert handful["height"].distance == pytest.approx(0.02, abs=0.01)


def test_a_gone_class_is_left_out_and_named():
    counts = {"height": {"28": 5}, "width": {"28": 5}, BRIGHTNESS: {"90": 5}}
    baseline = {"label_map": {"a": 0, "b": 1}, CLASS_HISTOGRAMS: {"train": {"a": counts}}}
    baseline[CLASS_HISTOGRAMS]["train"]["b"] = {**counts, BRIGHTNESS: {"30": 5}}
    current = {"label_map": {"a": 0}, CLASS_HISTOGRAMS: {"train": {"a": counts}}}
    measured, scope = _distances(current, baseline)
    assert scope.describe() == "on 1 shared class; 1 gone class not compared"
    assert {f: d.distance for f, d in measured.items()} == dict.fromkeys(THRESHOLDS, 0.0)
    # A split either side counted no image of is not measured.
    assert shared_class_distances(current, baseline, "eval", THRESHOLDS)[0] == []


def test_the_distance_is_the_share_of_images_moved_either_way():
    baseline = {100: 900}
    darker = {100: 600, 70: 300}
    assert counts_distance(darker, baseline) == pytest.approx(1 / 3)
    assert counts_distance(baseline, darker) == pytest.approx(1 / 3)
    assert counts_distance(baseline, baseline) == 0.0
