"""Numbers and record keys as the pages show them."""

import pytest

from pipeline.ui import readable


@pytest.mark.parametrize(
    ("value", "shown"),
    [
        (0.98765, "0.988"),
        (12.3456, "12.3"),
        (1234.5, "1,234"),
        (1234567, "1,234,567"),
        (0.000012345, "1.23e-05"),
        (0.0, "0"),
        (-0.5, "-0.500"),
        (True, "yes"),
        (float("nan"), "nan"),
    ],
)
def test_numbers_have_three_significant_digits(value, shown):
    assert readable.number(value) == shown


def test_a_key_gives_its_unit_to_the_value():
    assert readable.fact("float16_latency_p50_ms", 1.38123) == ("float16 latency p50", "1.38 ms")
    assert readable.fact("load_seconds", 12.0) == ("load", "12.0 s")
    assert readable.fact("input_wait_share", 0.0512) == ("input wait share", "5.12 %")
    assert readable.fact("int8_accuracy_gap_points", -12.5) == ("int8 accuracy gap", "-12.5 points")
    assert readable.fact("problems", ["slow", "big"]) == ("problems", "slow, big")
    assert readable.fact("p99_ms", None) == ("p99", "-")


def test_times_are_shown_without_their_zone_and_odd_text_as_it_is():
    assert readable.when("2026-12-04T17:06:26.500000+00:00") == "2026-12-04 17:06:26"
    assert readable.when("yesterday") == "yesterday"
