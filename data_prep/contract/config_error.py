"""The one error type of a bad setting, whichever stage's settings it is in."""

from __future__ import annotations


class ConfigError(ValueError):
    """A setting is invalid; the message starts with the field's name."""

    def __init__(self, field: str, problem: str):
        super().__init__(f"{field}: {problem}")
        self.field = field
