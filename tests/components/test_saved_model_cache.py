"""The post-training scorers' shared load: one object per model path, only the last one kept."""

import os
import shutil

import pytest

from components import saved_model_cache

pytestmark = pytest.mark.slow  # loads an exported SavedModel


def test_a_model_is_loaded_once_and_replaced_by_the_next(model_artifact, tmp_path):
    first_dir = os.path.join(model_artifact.uri, "Format-Serving")
    second_dir = str(tmp_path / "second")
    shutil.copytree(first_dir, second_dir)

    first = saved_model_cache.load(first_dir)
    assert saved_model_cache.load(first_dir) is first and first.load_seconds > 0
    second = saved_model_cache.load(second_dir)

    assert second is not first
    assert saved_model_cache.load(first_dir) is not first  # the cache holds the last model only
