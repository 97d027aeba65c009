"""docs/performance.md from build/bench/results.json: a section per benchmark part, with the
machine and date it was measured on, so the figures a reader sees are the ones a run produced.

The renderer knows no part. A part module may define `section(records) -> Section` (its own
title, table and notes, computed from its records); any other part gets `default_section`: the
first line of its docstring as the title and a table of its records. A new part plugs in by
being listed in benchmarks/run.py's PARTS.
"""

from __future__ import annotations

import dataclasses
import datetime
import os
import types

from benchmarks import machine

DOCS_PATH = os.path.join("docs", "performance.md")
RUN_KEY = "run"  # each record's: when, on what and with which settings its part ran
SETTINGS_PREFIX = "BENCH_"  # environment variables that size the parts


@dataclasses.dataclass(frozen=True)
class Section:
    title: str
    columns: tuple[str, ...]
    rows: tuple[tuple[str, ...], ...]
    notes: tuple[str, ...] = ()


def run_context(environ: dict | None = None) -> dict:
    """What a part's records carry about the run that measured them."""
    environ = os.environ if environ is None else environ
    return {
        "measured_at": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "machine": machine.describe(),
        "load_average": round(os.getloadavg()[0], 1) if hasattr(os, "getloadavg") else None,
        "settings": {k: v for k, v in sorted(environ.items()) if k.startswith(SETTINGS_PREFIX)},
    }


def number(value) -> str:
    """A figure at four significant digits, with thousands separators."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return str(value)
    return f"{value:,.4g}" if abs(value) < 1e15 else f"{value:.3e}"


def common_prefix(names: list[str]) -> str:
    """The dotted prefix a part's record names share ('input.limit.' for input.limit.*), never a
    whole name; a lone record keeps all but its first component."""
    split = [name.split(".") for name in names]
    if not split:
        return ""
    shared = 1 if len(split) == 1 else 0
    while len(split) > 1 and all(len(parts) > shared + 1 for parts in split):
        if len({parts[shared] for parts in split}) > 1:
            break
        shared += 1
    shared = min(shared, min(len(parts) for parts in split) - 1)
    return ".".join(split[0][:shared]) + "." if shared else ""


def default_section(doc: str | None, records: list[dict], notes=()) -> Section:
    """The docstring's first line as the title; a row per record: what (its name without the
    prefix the part's names share), value, unit, and its ratio to the record it is compared
    with."""
    part = records[0].get("part", "") if records else ""
    title = (doc or part).strip().splitlines()[0].rstrip(".")
    prefix = common_prefix([record["name"] for record in records])

    def short(name: str) -> str:
        return name[len(prefix) :] if prefix and name.startswith(prefix) else name

    rows = tuple(
        (
            short(record["name"]),
            number(record["value"]),
            record.get("unit", ""),
            (
                f"{record['ratio']:.2f}x {short(record['baseline'])}"
                if "ratio" in record and "baseline" in record
                else ""
            ),
        )
        for record in records
    )
    return Section(title, ("measured", "value", "unit", "ratio"), rows, tuple(notes))


def named(records: list[dict], suffix: str) -> dict:
    """The record whose name ends with '.' + suffix (a part's notes quote its own figures)."""
    [found] = [record for record in records if record["name"].endswith("." + suffix)]
    return found


def part_section(name: str, module: types.ModuleType | None, records: list[dict]) -> Section:
    if module is not None and hasattr(module, "section"):
        return module.section(records)
    return default_section(module.__doc__ if module else None, records)


def render(records: list[dict], parts: dict[str, types.ModuleType]) -> str:
    """The page: parts in `parts` order, then any part results.json still holds that is no
    longer listed."""
    by_part: dict[str, list[dict]] = {}
    for record in records:
        by_part.setdefault(record.get("part", "unnamed"), []).append(record)
    names = [name for name in parts if name in by_part]
    names += [name for name in by_part if name not in parts]
    lines = [
        "# Performance",
        "",
        "Written by `make bench` (benchmarks/run.py) from `build/bench/results.json`; do not edit",
        "by hand. Every figure below was measured by the part named, on the machine and at the",
        "time its section gives; a figure measured on a shared machine varies with the load.",
        "",
        f"This file holds the parts: {', '.join(f'`{name}`' for name in names) or 'none'}.",
        "To regenerate: `make bench` (every part) or `make bench PARTS='input ingest'` (parts by",
        "name or by group; the other parts' results in `build/bench/results.json` are kept).",
        "`BENCH_*` settings, where a section lists them, made that run smaller than the default.",
        "Each part also draws a chart, `build/bench/<part>.png`.",
    ]
    for name in names:
        section = part_section(name, parts.get(name), by_part[name])
        lines += ["", f"## {section.title} (`{name}`)", "", _provenance(by_part[name]), ""]
        lines.append("| " + " | ".join(section.columns) + " |")
        lines.append("|" + "---|" * len(section.columns))
        lines += [
            "| " + " | ".join(cell.replace("|", "\\|") for cell in row) + " |"
            for row in section.rows
        ]
        if section.notes:
            lines.append("")
            lines += [f"- {note}" for note in section.notes]
    return "\n".join(lines) + "\n"


def _provenance(records: list[dict]) -> str:
    run = records[0].get(RUN_KEY)
    if not run:
        return "Measured before results recorded their machine and date."
    text = f"Measured {run['measured_at']} on {machine.summary(run['machine'])}"
    if run.get("load_average") is not None:
        text += f", load average {run['load_average']} at the start"
    settings = ", ".join(f"`{key}={value}`" for key, value in run.get("settings", {}).items())
    return text + (f"; settings: {settings}." if settings else ".")


def write(records: list[dict], parts: dict[str, types.ModuleType], path: str = DOCS_PATH) -> str:
    directory = os.path.dirname(path)
    if directory:
        os.makedirs(directory, exist_ok=True)
    with open(path, "w") as handle:
        handle.write(render(records, parts))
    return path
