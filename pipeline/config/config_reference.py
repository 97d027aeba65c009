"""docs/configuration.md, generated from the config dataclasses: every field's dotted name (what
`--set` and a config file take), type, default and meaning, the meaning read from the "Attributes:"
section of its dataclass's docstring, so the reference cannot drift from the code.

    python -m pipeline.config.config_reference > docs/configuration.md

A field without a documented meaning is an error (ConfigReferenceError names it), not a blank.
"""

from __future__ import annotations

import dataclasses
import inspect
import json
import re
import sys
import types
import typing
from collections.abc import Iterator

from pipeline.config.pipeline_config import PRESETS, PipelineConfig

COMMAND = "python -m pipeline.config.config_reference > docs/configuration.md"
REQUIRED = "required"
_ENTRY = re.compile(r"^(?P<names>[A-Za-z_][\w]*(?:, [A-Za-z_][\w]*)*): ?(?P<text>.*)$")


class ConfigReferenceError(ValueError):
    """A config field the reference cannot document."""


@dataclasses.dataclass(frozen=True)
class Field:
    dotted: str
    type: str
    default: str
    meaning: str


@dataclasses.dataclass(frozen=True)
class Section:
    prefix: str  # "" for the top level, else "trainer." and the like
    cls: type
    summary: str
    fields: tuple[Field, ...]


def attribute_meanings(cls: type) -> dict[str, str]:
    """The "Attributes:" section of cls's docstring (Google style): field name -> meaning, one
    line. An entry may document several fields at once ("a, b: meaning")."""
    lines = (inspect.getdoc(cls) or "").splitlines()
    try:
        start = lines.index("Attributes:") + 1
    except ValueError:
        return {}
    meanings: dict[str, str] = {}
    names: list[str] = []
    entry_indent = None
    for line in lines[start:]:
        if not line.strip():
            break
        indent = len(line) - len(line.lstrip())
        if entry_indent is None:
            entry_indent = indent
        if indent < entry_indent:
            break
        found = _ENTRY.match(line.strip()) if indent == entry_indent else None
        if found:
            names = found.group("names").split(", ")
            for name in names:
                meanings[name] = found.group("text")
        else:
            for name in names:
                meanings[name] = f"{meanings[name]} {line.strip()}".strip()
    return meanings


def summary(cls: type) -> str:
    """The docstring's text before its "Attributes:" section, as one paragraph per blank line."""
    text = (inspect.getdoc(cls) or "").split("Attributes:", 1)[0].strip()
    return "\n\n".join(" ".join(part.split()) for part in text.split("\n\n"))


def type_name(annotation) -> str:
    if annotation is type(None):
        return "None"
    if isinstance(annotation, types.UnionType) or typing.get_origin(annotation) is typing.Union:
        return " | ".join(type_name(arg) for arg in typing.get_args(annotation))
    if typing.get_origin(annotation) is not None:
        arguments = ", ".join(
            "..." if arg is Ellipsis else type_name(arg) for arg in typing.get_args(annotation)
        )
        return f"{typing.get_origin(annotation).__name__}[{arguments}]"
    return getattr(annotation, "__name__", str(annotation))


def value_text(value) -> str:
    """A value as `--set` and a config file write it (JSON: true, null, [1, 2])."""
    if isinstance(value, tuple):
        value = list(value)
    return json.dumps(value)


def sections(cls: type = PipelineConfig, prefix: str = "") -> Iterator[Section]:
    """cls's own fields, then each nested dataclass field's, depth first, in declaration order."""
    meanings = attribute_meanings(cls)
    hints = typing.get_type_hints(cls)
    own, nested = [], []
    for field in dataclasses.fields(cls):
        dotted = prefix + field.name
        if field.name not in meanings:
            raise ConfigReferenceError(
                f"{dotted}: {cls.__module__}.{cls.__name__} documents no meaning for "
                f"{field.name!r}; add it to the docstring's Attributes: section"
            )
        kind = hints[field.name]
        if dataclasses.is_dataclass(kind):
            nested.append((kind, dotted + "."))
            continue
        if field.default is not dataclasses.MISSING:
            default = value_text(field.default)
        elif field.default_factory is not dataclasses.MISSING:
            default = value_text(field.default_factory())
        else:
            default = REQUIRED
        own.append(Field(dotted, type_name(kind), default, meanings[field.name]))
    yield Section(prefix, cls, summary(cls), tuple(own))
    for kind, inner in nested:
        yield from sections(kind, inner)


def preset_differences() -> dict[str, list[tuple[str, str]]]:
    """Per preset other than `local`: (dotted field, value) where it differs from `local`."""
    data = "DATA"
    local = _flat(dataclasses.asdict(PRESETS["local"](data)))
    differences = {}
    for name, preset in PRESETS.items():
        if name == "local":
            continue
        values = _flat(dataclasses.asdict(preset(data)))
        differences[name] = [
            (key, value_text(value)) for key, value in values.items() if local.get(key) != value
        ]
    return differences


def _flat(values: dict, prefix: str = "") -> dict:
    flat = {}
    for key, value in values.items():
        if isinstance(value, dict):
            flat.update(_flat(value, f"{prefix}{key}."))
        else:
            flat[prefix + key] = value
    return flat


def _cell(text: str) -> str:
    """text inside a Markdown table cell: pipes escaped, and angle brackets, which Markdown would
    take for HTML tags."""
    return text.replace("|", "\\|").replace("<", "&lt;").replace(">", "&gt;")


def render() -> str:
    lines = [
        "# Configuration reference",
        "",
        "Generated from the config dataclasses' docstrings; do not edit by hand (a test fails",
        f"when this file is stale). To regenerate: `{COMMAND}`.",
        "",
        "Settings come from a preset (`--preset`, default `local`), then a config file",
        "(`--config FILE`, YAML or TOML, nested as the dotted names are: `trainer: {epochs: 5}`),",
        "then the flags `--data` and `--build-dir`, then `--set NAME=VALUE` (repeatable; the",
        "value is read as JSON, else as text): a flag beats the file, which beats the preset.",
        "Every value is checked before any work starts, and an error names the field.",
        "`imgpipe config show` prints the effective settings as a file `--config` reads back;",
        "with `--origins`, each field with its value and where it came from.",
        f"`ingest.input` is {REQUIRED}: `--data` gives it (the embedded dataset when left out).",
        "",
        "The defaults below are the `local` preset's. The other presets differ in:",
        "",
    ]
    for name, changed in preset_differences().items():
        values = ", ".join(f"`{key}={value}`" for key, value in changed)
        lines.append(f"- `{name}`: {values or 'nothing'}")
    for section in sections():
        title = f"`{section.prefix}*`" if section.prefix else "top level"
        source = f"{section.cls.__module__.replace('.', '/')}.py"
        lines += ["", f"## {title}: {section.cls.__name__} (`{source}`)", ""]
        if section.summary:
            lines += [section.summary, ""]
        lines += ["| name | type | default | meaning |", "|---|---|---|---|"]
        for field in section.fields:
            lines.append(
                f"| `{field.dotted}` | `{_cell(field.type)}` | `{_cell(field.default)}` "
                f"| {_cell(field.meaning)} |"
            )
    return "\n".join(lines) + "\n"


def main() -> None:
    sys.stdout.write(render())


if __name__ == "__main__":
    main()
