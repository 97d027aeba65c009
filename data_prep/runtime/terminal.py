"""Text that names files or classes, made safe to print: a folder name is the user's data, and
escape sequences in it (ANSI colours, cursor moves, a title change, bidirectional overrides)
would act on the terminal that shows it instead of being shown."""

from __future__ import annotations

import re

# C0 controls but tab and newline, DEL, C1 controls, and the bidirectional formatting marks.
_UNSAFE = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]")


def _escaped(match: re.Match) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code <= 0xFF else f"\\u{code:04x}"


def terminal_safe(text: str) -> str:
    """text with every control character written as a visible escape (ESC as \\x1b); line
    breaks and tabs are kept, so a multi-line report stays one."""
    return _UNSAFE.sub(_escaped, text)
