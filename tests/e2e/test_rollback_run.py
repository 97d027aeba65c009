"""A run after a rollback leaves the pinned version serving and ends with one line saying which
pushed version is not served."""

import os
import shutil

import pytest

from components.serving.versions import served_version
from pipeline.runners.local import run_local
from pipeline.serving.rollback import roll_back
from tests.pipeline.tiny_pipeline import tiny_config, write_images

pytestmark = pytest.mark.slow


def test_a_run_after_a_rollback_keeps_the_pinned_version_serving(tmp_path):
    config = tiny_config(write_images(tmp_path / "images"), tmp_path / "build")
    first = run_local(config)
    base, pushed = os.path.split(first.pushed_to)
    earlier = str(int(pushed) - 1)  # a whole earlier version to roll back to
    shutil.copytree(first.pushed_to, os.path.join(base, earlier))
    roll_back(base, earlier)

    lines = []
    second = run_local(config, say=lines.append)

    assert second.exit_code == 0
    assert served_version(base) == int(earlier)
    assert lines[-1] == (
        f"rolled back to {earlier}: version {pushed} pushed but not served; "
        "imgpipe models rollback --latest to serve it"
    )
