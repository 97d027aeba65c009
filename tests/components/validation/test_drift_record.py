"""How a measured distance and the classes it was measured on read in the gate's lines and the
run summary."""

import pytest

from components.validation.drift_record import ClassScope, Distance


def test_a_distance_passes_up_to_its_threshold_and_says_so():
    assert Distance("height", 0.2, 0.2).describe() == "height 0.200 (threshold 0.2): pass"
    assert not Distance("width", 0.3, 0.2).passed


def test_the_scope_names_how_many_classes_were_compared_and_left_out():
    shared = tuple(str(digit) for digit in range(9))
    assert ClassScope(shared).describe() == "on 9 shared classes"
    assert ClassScope(shared, new=("9",)).describe() == (
        "on 9 shared classes; 1 new class not compared"
    )
    assert ClassScope(("a",), new=("b", "c"), gone=("d",)).describe() == (
        "on 1 shared class; 2 new classes not compared; 1 gone class not compared"
    )
    assert ClassScope(whole_split="no ingest report of the baseline data").describe() == (
        "on the whole split, image sizes only (no ingest report of the baseline data)"
    )


def test_on_small_spans_the_noise_floor_decides_and_says_so():
    # 7 of 30 images moved: two samples of one distribution do that by chance as often as not.
    chance = Distance("brightness", 0.233, 0.2, images=30, baseline_images=30)
    assert chance.floor == pytest.approx(0.503, abs=0.001)
    assert chance.passed
    assert chance.describe() == (
        "brightness 0.233 (threshold 0.2, noise floor 0.50 at 30 and 30 images): pass"
    )
    assert not Distance("brightness", 0.6, 0.2, images=30, baseline_images=30).passed
    # Thousands of images: chance moves a few percent, so the threshold decides.
    large = Distance("height", 0.21, 0.2, images=5000, baseline_images=5000)
    assert large.floor == pytest.approx(0.039, abs=0.001) and not large.passed
    assert large.describe() == "height 0.210 (threshold 0.2): stop"


def test_a_record_without_sample_sizes_reads_back_with_no_floor():
    recorded = Distance("width", 0.3, 0.2, images=40, baseline_images=50).record()
    assert recorded["floor"] > 0.2 and recorded["passed"]
    assert Distance.from_record(recorded) == Distance("width", 0.3, 0.2, 40, 50)
    old = {"feature": "width", "distance": 0.3, "threshold": 0.2, "passed": False}
    assert Distance.from_record(old).floor == 0 and not Distance.from_record(old).passed
