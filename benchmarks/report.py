"""docs/performance.md from build/bench/results.json: a page people read. First the headline
table (each part's answer, one line each), then the tables a part shows whole (the transfer
learning table), then a short section per part: what its figures mean, when, where and with
which settings they were measured, and its chart. The raw figures stay in results.json.

The renderer knows no part. A part module may define:
  TITLE              its section's heading; a constant, so a link to the section always resolves
                     (default: the first line of its docstring)
  headline(records)  rows (what, measured) for the headline table; a part that defines it and
                     has no results gets one row saying so
  meaning(records)   a sentence or two on what its figures mean (default: the notes of its
                     section(records), at most two)
  section(records)   a Section: its notes, and a table of its own for a part in SHOWN_WHOLE
Every part listed in benchmarks/run.py PARTS has a section; one without results in
results.json says "not measured in this run" and shows no figure.
"""

from __future__ import annotations

import dataclasses
import datetime
import os
import re
import types

from benchmarks import machine

DOCS_PATH = os.path.join("docs", "performance.md")
CHARTS_FOLDER = "performance"  # beside the page: docs/performance/<part>.png
RUN_KEY = "run"  # each record's: when, on what and with which settings its part ran
SETTINGS_PREFIX = "BENCH_"  # environment variables that size the parts
NOT_MEASURED = "not measured in this run"
# Parts whose own table is the answer, shown whole under the headline table.
SHOWN_WHOLE = ("transfer",)
MEANING_SENTENCES = 2


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


def find(records: list[dict], suffix: str) -> dict | None:
    """The record whose name ends with '.' + suffix, or None where the part did not measure it."""
    found = [record for record in records if record["name"].endswith("." + suffix)]
    return found[0] if len(found) == 1 else None


def title_of(name: str, module: types.ModuleType | None) -> str:
    if module is not None and getattr(module, "TITLE", None):
        return module.TITLE
    doc = (module.__doc__ if module else None) or name
    return doc.strip().splitlines()[0].rstrip(".")


def heading(name: str, module: types.ModuleType | None) -> str:
    return f"{title_of(name, module)} (`{name}`)"


def anchor(text: str) -> str:
    """GitHub's anchor of a heading: lower case, punctuation dropped, spaces to '-'."""
    return re.sub(r"[^\w\- ]", "", text.lower()).replace(" ", "-")


def meaning(module: types.ModuleType | None, records: list[dict]) -> list[str]:
    if module is not None and hasattr(module, "meaning"):
        return list(module.meaning(records))
    if module is not None and hasattr(module, "section"):
        return list(module.section(records).notes[:MEANING_SENTENCES])
    return []


def render(
    records: list[dict], parts: dict[str, types.ModuleType], charts: set[str] = frozenset()
) -> str:
    """The page: every part in `parts` order, then any part results.json still holds that is no
    longer listed. `charts`: the parts whose chart is drawn beside the page."""
    by_part: dict[str, list[dict]] = {}
    for record in records:
        by_part.setdefault(record.get("part", "unnamed"), []).append(record)
    names = list(parts) + [name for name in by_part if name not in parts]
    measured = [name for name in names if name in by_part]
    lines = [
        "# Performance",
        "",
        "Written by `make bench` (benchmarks/run.py) from `build/bench/results.json`, which keeps",
        "every raw figure; do not edit by hand. `make bench PARTS='input ingest'` reruns parts by",
        "name or group and keeps the others' results. Figures from a shared machine vary with its",
        f"load. {len(measured)} of {len(names)} parts have results; "
        + _machines(by_part, measured),
        "",
        "## Headline",
        "",
        "| what | measured | part |",
        "|---|---|---|",
    ]
    for name in names:
        module, mine = parts.get(name), by_part.get(name, [])
        link = f"[{name}](#{anchor(heading(name, module))})"
        if mine and module is not None and hasattr(module, "headline"):
            lines += [f"| {what} | {answer} | {link} |" for what, answer in module.headline(mine)]
        elif module is not None and hasattr(module, "headline"):
            lines.append(f"| {title_of(name, module)} | {NOT_MEASURED} | {link} |")
    for name in (name for name in SHOWN_WHOLE if name in names):
        lines += ["", *_whole_table(name, parts.get(name), by_part.get(name, []))]
    for name in names:
        module, mine = parts.get(name), by_part.get(name, [])
        lines += ["", f"## {heading(name, module)}"]
        if not mine:
            lines.append(f"{NOT_MEASURED.capitalize()}: `make bench PARTS={name}` measures it.")
            continue
        sentences = [
            sentence[:1].upper() + sentence[1:] + ("" if sentence.endswith((".", ")")) else ".")
            for sentence in meaning(module, mine)
            if sentence
        ]
        lines.append(" ".join([*sentences, _provenance(mine)]))
        if name in charts:
            lines += ["", f"![{name}]({CHARTS_FOLDER}/{name}.png)"]
    return "\n".join(lines) + "\n"


def _whole_table(name: str, module: types.ModuleType | None, records: list[dict]) -> list[str]:
    title = title_of(name, module)
    if not records or module is None or not hasattr(module, "section"):
        return [f"**{title}**: {NOT_MEASURED}."]
    section = module.section(records)
    return [
        f"**{section.title}** ([{name}](#{anchor(heading(name, module))})):",
        "",
        "| " + " | ".join(section.columns) + " |",
        "|" + "---|" * len(section.columns),
        *(
            "| " + " | ".join(cell.replace("|", "\\|") for cell in row) + " |"
            for row in section.rows
        ),
    ]


def _machines(by_part: dict[str, list[dict]], measured: list[str]) -> str:
    """The machines the results were measured on, once each."""
    described = {
        machine.summary(records[0][RUN_KEY]["machine"])
        for name in measured
        if (records := by_part[name])[0].get(RUN_KEY)
    }
    if not described:
        return "no machine recorded."
    return "measured on " + "; ".join(sorted(described)) + "."


def _provenance(records: list[dict]) -> str:
    run = records[0].get(RUN_KEY)
    if not run:
        return "(Measured before results recorded their machine and date.)"
    text = f"(Measured {run['measured_at']}"
    if run.get("load_average") is not None:
        text += f", load average {run['load_average']}"
    settings = ", ".join(f"`{key}={value}`" for key, value in run.get("settings", {}).items())
    return text + (f"; {settings}" if settings else "") + ".)"


def write(
    records: list[dict],
    parts: dict[str, types.ModuleType],
    path: str = DOCS_PATH,
    charts: set[str] = frozenset(),
) -> str:
    directory = os.path.dirname(path)
    if directory:
        os.makedirs(directory, exist_ok=True)
    with open(path, "w") as handle:
        handle.write(render(records, parts, charts))
    return path


def chart_path(docs_path: str, part: str) -> str:
    """Where a part's chart goes: beside the page, so the page shows it."""
    return os.path.join(os.path.dirname(docs_path), CHARTS_FOLDER, f"{part}.png")
