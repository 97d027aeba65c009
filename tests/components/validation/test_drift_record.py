"""How a measured distance and the classes it was measured on read in the gate's lines and the
run summary."""

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
