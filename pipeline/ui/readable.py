"""Numbers and keys as people read them on the pages: three significant digits, a unit taken
from the key's suffix (`float16_latency_p50_ms` -> "float16 latency p50", "1.38 ms"), times
without their time zone. Registered as Jinja filters by the app and the one-file report."""

from __future__ import annotations

import datetime
import math

# A key's suffix -> the unit its values are in (the suffix is dropped from the label).
UNITS = (
    ("_ms", "ms"),
    ("_seconds", "s"),
    ("_points", "points"),
    ("_bytes", "bytes"),
    ("_mb", "MB"),
)
SHARES = ("_share", "_fraction")  # a 0..1 share of a whole, shown as a percentage
SIGNIFICANT = 3


def number(value: float | int) -> str:
    """3 significant digits, no exponent for everyday sizes, thousands grouped
    (0.98765 -> "0.988", 1234567 -> "1,234,567", 1234.5 -> "1,234")."""
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, int):
        return f"{value:,}"
    if not math.isfinite(value):
        return str(value)
    if value == 0:
        return "0"
    if abs(value) >= 10**SIGNIFICANT:
        return f"{value:,.0f}"
    if abs(value) < 1e-4:
        return f"{value:.{SIGNIFICANT - 1}e}"
    digits = SIGNIFICANT - 1 - math.floor(math.log10(abs(value)))
    return f"{round(value, digits):.{max(digits, 0)}f}"


def fact(key: str, value) -> tuple[str, str]:
    """A record's entry as (label, text): the unit moved from the key to the value."""
    unit = ""
    for suffix, name in UNITS:
        if key.endswith(suffix):
            key, unit = key[: -len(suffix)], name
            break
    if key.endswith(SHARES) and isinstance(value, float):
        value, unit = 100 * value, "%"
    label = key.replace("_", " ")
    if value is None:
        return label, "-"
    if isinstance(value, (int, float)):
        text = number(value)
    elif isinstance(value, (list, tuple)):
        text = ", ".join(number(v) if isinstance(v, (int, float)) else str(v) for v in value)
    elif isinstance(value, dict):
        text = ", ".join(f"{' = '.join(fact(k, v))}" for k, v in value.items())
    else:
        text = str(value)
    return label, f"{text} {unit}" if unit and text != "-" else text


def when(moment: str) -> str:
    """An ISO time as "2026-12-04 17:06:26" (the pages say UTC once, in their headers)."""
    try:
        parsed = datetime.datetime.fromisoformat(moment)
    except (TypeError, ValueError):
        return moment
    return parsed.strftime("%Y-%m-%d %H:%M:%S")


def register(environment) -> None:
    """The filters every page template may use."""
    environment.filters.update(number=number, when=when)
    environment.globals.update(fact=fact)
