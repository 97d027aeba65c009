"""Pipeline settings in a file a team can commit and review (YAML, or TOML by extension).

The file holds any subset of PipelineConfig's fields, nested as the dataclasses are
(`trainer: {epochs: 5}`); each value is checked exactly as `--set trainer.epochs=5` is, and the
result is validated, so an error names the file, the field and the value. `imgpipe config show`
prints a complete file (every field, defaults included) that loads back to the same config.
"""

from __future__ import annotations

import dataclasses
import json

from data_prep.contract.config_error import ConfigError
from pipeline.config.pipeline_config import PipelineConfig, override


def read_settings(path: str) -> dict:
    """The file's settings as a nested mapping; ConfigError naming the file when unreadable."""
    try:
        with open(path, "rb") as handle:
            raw = handle.read()
    except OSError as error:
        raise ConfigError(path, f"cannot be read ({error.strerror})") from error
    try:
        if path.endswith(".toml"):
            import tomli

            settings = tomli.loads(raw.decode())
        else:
            import yaml

            settings = yaml.safe_load(raw) or {}
    except Exception as error:  # noqa: BLE001 - either parser's error, reported alike
        first_line = str(error).strip().splitlines()[0]
        raise ConfigError(path, f"is not valid {_format(path)}: {first_line}") from error
    if not isinstance(settings, dict):
        raise ConfigError(path, f"must be a mapping of settings, not {type(settings).__name__}")
    return settings


def _format(path: str) -> str:
    return "TOML" if path.endswith(".toml") else "YAML"


def flatten(settings: dict, prefix: str = "") -> dict[str, object]:
    """{'trainer': {'epochs': 5}} -> {'trainer.epochs': 5}."""
    flat = {}
    for key, value in settings.items():
        path = f"{prefix}{key}"
        if isinstance(value, dict):
            flat.update(flatten(value, f"{path}."))
        else:
            flat[path] = value
    return flat


def as_setting(field: str, value) -> str:
    """A typed value as the `field=value` text --set reads back to it (None as null)."""
    return f"{field}={value if isinstance(value, str) else json.dumps(value)}"


def apply_settings(config: PipelineConfig, settings: dict, path: str) -> PipelineConfig:
    """config with the file's settings, each checked as --set checks it, then validated; every
    error names the file, the field and the value."""
    try:
        for field, value in flatten(settings).items():
            config = override(config, as_setting(field, value))
        return config.validate()
    except ConfigError as error:
        raise ConfigError(f"{path}: {error.field}", str(error).split(": ", 1)[1]) from error


def to_settings(config: PipelineConfig) -> dict:
    """Every field of config as a nested mapping of plain values (tuples as lists)."""
    return json.loads(json.dumps(dataclasses.asdict(config)))


def dump(config: PipelineConfig) -> str:
    """The config as a YAML file that apply_settings reads back to the same config."""
    import yaml

    return yaml.safe_dump(to_settings(config), sort_keys=False)
