import pytest

from data_prep.contract.label_map import class_change, class_names, merge_label_map


def test_first_span_numbers_classes_in_name_order():
    assert merge_label_map({}, ["square", "circle", "triangle"]) == {
        "circle": 0,
        "square": 1,
        "triangle": 2,
    }


def test_known_classes_keep_their_ids_and_new_ones_get_the_next():
    reference = {"circle": 0, "square": 1, "triangle": 2}
    # 'arrow' sorts first, but re-sorting would give it 0 and shift every known class.
    assert merge_label_map(reference, ["triangle", "arrow", "circle", "square", "cross"]) == {
        "circle": 0,
        "square": 1,
        "triangle": 2,
        "arrow": 3,
        "cross": 4,
    }


def test_a_gone_class_keeps_its_id_reserved():
    reference = {"circle": 0, "square": 1, "triangle": 2}
    # triangle is swapped for cross: cross must not take id 2, which meant triangle.
    merged = merge_label_map(reference, ["circle", "square", "cross"])
    assert merged == {"circle": 0, "square": 1, "cross": 3}
    change = class_change(reference, merged)
    assert (change.added, change.removed) == (("cross",), ("triangle",))
    assert change.describe() == "new class(es) cross and class(es) gone triangle"


def test_same_classes_are_no_change():
    reference = {"a": 0, "b": 1}
    assert not class_change(reference, merge_label_map(reference, ["b", "a"]))


def test_class_names_are_in_id_order_not_name_order():
    merged = merge_label_map({"circle": 0, "square": 1}, ["square", "arrow", "circle"])
    assert class_names(merged) == ["circle", "square", "arrow"]


def test_class_names_refuse_a_gap_in_the_ids():
    """A gone class leaves its id unused: a head trained on such a map would have an output no
    data trains, so the names are refused rather than shifted."""
    merged = merge_label_map({"circle": 0, "square": 1, "triangle": 2}, ["circle", "triangle"])
    with pytest.raises(ValueError, match=r"label ids are not 0\.\.1"):
        class_names(merged)
