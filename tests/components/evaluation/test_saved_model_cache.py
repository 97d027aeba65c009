"""The post-training scorers' shared load: one object per model path, the last two kept (the
Evaluator's candidate and baseline)."""

import os
import shutil

import pytest

from components.evaluation import saved_model_cache

pytestmark = pytest.mark.slow  # loads an exported SavedModel


def test_a_model_is_loaded_once_and_the_least_recent_of_three_is_dropped(model_artifact, tmp_path):
    candidate_dir = os.path.join(model_artifact.uri, "Format-Serving")
    baseline_dir, next_dir = str(tmp_path / "baseline"), str(tmp_path / "next")
    shutil.copytree(candidate_dir, baseline_dir)
    shutil.copytree(candidate_dir, next_dir)

    candidate = saved_model_cache.load(candidate_dir)
    assert saved_model_cache.load(candidate_dir) is candidate and candidate.load_seconds > 0
    baseline = saved_model_cache.load(baseline_dir)
    assert baseline is not candidate
    assert saved_model_cache.load(candidate_dir) is candidate  # both kept
    saved_model_cache.load(next_dir)

    assert saved_model_cache.load(candidate_dir) is candidate  # used last, kept
    assert saved_model_cache.load(baseline_dir) is not baseline  # the least recent, dropped
