"""terminal_safe: control characters become visible escapes; text, tabs and line breaks stay."""

import pytest

from data_prep.runtime.terminal import terminal_safe


@pytest.mark.parametrize(
    ("text", "shown"),
    [
        ("cat\x1b[31mred\x1b[0m", "cat\\x1b[31mred\\x1b[0m"),
        ("title\x1b]0;owned\x07", "title\\x1b]0;owned\\x07"),
        ("back\rspace\x08", "back\\x0dspace\\x08"),
        ("c1\x9bcsi and del\x7f", "c1\\x9bcsi and del\\x7f"),
        ("bidi\u202eevil", "bidi\\u202eevil"),
        ("two\nlines\tand a tab", "two\nlines\tand a tab"),
        ("café 猫 🐈", "café 猫 🐈"),
    ],
)
def test_control_characters_are_shown_not_obeyed(text, shown):
    assert terminal_safe(text) == shown
