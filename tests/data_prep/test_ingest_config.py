import dataclasses

import pytest

from data_prep.contract.config_error import ConfigError
from data_prep.ingest_config import IngestConfig
from data_prep.reading.image_validation import ImageLimits

GOOD = IngestConfig(input="images/")


def test_defaults_are_valid():
    assert GOOD.validate() is GOOD
    assert GOOD.splits == ("train", "eval")
    assert dataclasses.replace(GOOD, test_fraction=0.1).splits == ("train", "eval", "test")


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"input": ""}, "input"),
        ({"eval_fraction": -0.1}, "eval_fraction"),
        ({"test_fraction": 1.5}, "test_fraction"),
        ({"eval_fraction": 0.6, "test_fraction": 0.4}, "eval_fraction"),
        ({"max_reject_fraction": 2.0}, "max_reject_fraction"),
        ({"target_shard_bytes": 1000}, "target_shard_bytes"),
        ({"files_per_bundle": 0}, "files_per_bundle"),
        ({"min_shards": 0}, "min_shards"),
        ({"limits": ImageLimits(max_pixels=0)}, "limits.max_pixels"),
        ({"limits": ImageLimits(max_file_bytes=0)}, "limits.max_file_bytes"),
        ({"limits": ImageLimits(max_side=4)}, "limits.max_side"),
        ({"limits": ImageLimits(jpeg_quality=101)}, "limits.jpeg_quality"),
        ({"limits": ImageLimits(decoder_memory_bytes=1 << 20)}, "limits.decoder_memory_bytes"),
        ({"limits": ImageLimits(decode_timeout_s=0)}, "limits.decode_timeout_s"),
    ],
)
def test_bad_values_fail_naming_the_field(change, field):
    with pytest.raises(ConfigError) as error:
        dataclasses.replace(GOOD, **change).validate()
    assert error.value.field == field
    assert str(error.value).startswith(f"{field}: ")


def test_json_round_trip_keeps_nested_limits():
    config = dataclasses.replace(GOOD, eval_fraction=0.3, limits=ImageLimits(max_side=512))
    assert IngestConfig.from_json(config.to_json()) == config
