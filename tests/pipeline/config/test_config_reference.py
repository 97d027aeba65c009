"""The configuration reference: generated from the dataclasses' docstrings, current in docs/, and
loud about a field nobody documented."""

import dataclasses
import pathlib
import typing

import pytest

from components.training.trainer_config import (
    IMAGENET_FINE_TUNE_LEARNING_RATE,
    LITE0_IMAGENET_IMAGE_SIZE,
)
from pipeline.config import config_reference
from pipeline.config.config_reference import (
    COMMAND,
    ConfigReferenceError,
    attribute_meanings,
    sections,
)
from pipeline.config.pipeline_config import PipelineConfig

REFERENCE = pathlib.Path(__file__).resolve().parents[3] / "docs" / "configuration.md"


def test_docs_configuration_is_current():
    assert REFERENCE.read_text() == config_reference.render(), (
        f"docs/configuration.md is stale: regenerate it with `{COMMAND}`"
    )


def test_every_field_of_every_config_is_in_the_reference():
    def dotted(cls, prefix=""):
        for name, kind in typing.get_type_hints(cls).items():
            if dataclasses.is_dataclass(kind):
                yield from dotted(kind, f"{prefix}{name}.")
            else:
                yield prefix + name

    documented = {field.dotted for section in sections() for field in section.fields}
    assert set(dotted(PipelineConfig)) == documented
    assert "trainer.intra_op_threads" in documented  # documented together with inter_op_threads


def test_meanings_span_continuation_lines_and_shared_entries():
    @dataclasses.dataclass
    class Example:
        """Something.

        Attributes:
          first, second: one meaning
            that goes on.
          third: another.

        Not an attribute: after the blank line.
        """

        first: int = 1
        second: int = 2
        third: int = 3

    assert attribute_meanings(Example) == {
        "first": "one meaning that goes on.",
        "second": "one meaning that goes on.",
        "third": "another.",
    }


def test_an_undocumented_field_is_an_error_naming_it():
    @dataclasses.dataclass
    class Partly:
        """A config with a field nobody documented.

        Attributes:
          known: documented.
        """

        known: int = 0
        forgotten: int = 0

    with pytest.raises(ConfigReferenceError, match=r"^forgotten: .*Partly.*'forgotten'"):
        list(sections(Partly))


def test_the_reference_gives_the_imagenet_backbones_own_defaults():
    meanings = {field.dotted: field.meaning for section in sections() for field in section.fields}
    rate = f"fine-tunes at {IMAGENET_FINE_TUNE_LEARNING_RATE:g} instead"
    assert rate in meanings["trainer.fine_tune_learning_rate"]
    size = f"trains at {LITE0_IMAGENET_IMAGE_SIZE} (measured"
    assert size in meanings["trainer.image_size"]
