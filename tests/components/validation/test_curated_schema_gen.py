"""The curated schema is a contract that the next span of the same kind passes and a span that
breaks it fails; what TFDV's own inference would flag on every new drop is left out."""

import pandas as pd
import pytest
import tensorflow_data_validation as tfdv

from components.validation.curated_schema_gen import curate_schema
from data_prep.contract import features

MAX_SIDE = 4096


def _span(first: int, count: int = 12, image_format="jpeg", height=24, labels=("a", "b", "c")):
    return tfdv.generate_statistics_from_dataframe(
        pd.DataFrame(
            {
                features.IMAGE_FORMAT: [image_format] * count,
                features.HEIGHT: [height] * count,
                features.WIDTH: [32] * count,
                features.LABEL: [i % len(labels) for i in range(count)],
                features.LABEL_NAME: [labels[i % len(labels)] for i in range(count)],
                features.SOURCE_PATH: [f"x/{first + i}.jpg" for i in range(count)],
                features.SHA256: [f"{first + i:064x}" for i in range(count)],
            }
        )
    )


def _anomalous_features(statistics, schema) -> set[str]:
    return set(tfdv.validate_statistics(statistics, schema).anomaly_info)


@pytest.fixture(scope="module")
def schemas():
    inferred = tfdv.infer_schema(_span(0))
    return inferred, curate_schema(inferred, MAX_SIDE)


def test_inference_alone_flags_every_new_hash_and_path(schemas):
    inferred, _ = schemas
    assert {features.SHA256, features.SOURCE_PATH} <= _anomalous_features(_span(100), inferred)


def test_a_new_span_of_the_same_kind_passes_the_curated_schema(schemas):
    _, curated = schemas
    assert _anomalous_features(_span(100), curated) == set()
    # PNG is a format the ingest writes, and the class set is the gate's to judge.
    assert _anomalous_features(_span(200, image_format="png", labels=("a", "z")), curated) == set()


def test_the_curated_schema_keeps_types_and_bounds_sizes(schemas):
    _, curated = schemas
    by_name = {feature.name: feature for feature in curated.feature}
    assert list(by_name[features.IMAGE_FORMAT].string_domain.value) == list(features.IMAGE_FORMATS)
    assert by_name[features.HEIGHT].int_domain.min == 1
    assert by_name[features.HEIGHT].int_domain.max == MAX_SIDE
    for name in (features.SHA256, features.SOURCE_PATH, features.LABEL_NAME):
        assert by_name[name].WhichOneof("domain_info") is None
    assert not curated.string_domain  # no global enumerations left behind
    assert _anomalous_features(_span(300, image_format="gif"), curated) == {features.IMAGE_FORMAT}
    assert _anomalous_features(_span(300, height=MAX_SIDE + 1), curated) == {features.HEIGHT}
