"""A pushed model whose files were removed is pushed again by the next, otherwise cached, run;
the broken folder is moved aside (never deleted) with a line, and a whole one (its model card
pushed with it) is reused; a run report that cannot be written costs the run one line, not its
outcome."""

import os
import shutil

import pytest
import tensorflow as tf

from pipeline.runners.local import run_local
from pipeline.ui.report import report_path
from tests.pipeline.tiny_pipeline import tiny_config, write_images

pytestmark = pytest.mark.slow


def test_a_pushed_model_without_its_variables_is_pushed_again_by_a_cached_rerun(tmp_path):
    config = tiny_config(write_images(tmp_path / "images"), tmp_path / "build")
    first = run_local(config)
    assert first.pushed_to and os.path.isdir(os.path.join(first.pushed_to, "variables"))
    shutil.rmtree(os.path.join(first.pushed_to, "variables"))
    summaries = os.path.dirname(report_path(config.pipeline_root, first.run_id))
    shutil.rmtree(summaries)
    with open(summaries, "w") as handle:  # the report's folder is a file now
        handle.write("in the way")

    lines = []
    second = run_local(config, say=lines.append)

    states = {c.node: c.state for c in second.components}
    assert states["Trainer"] == "cached" and states["ServingCheck"] == "cached"
    assert states["ModelCardGen"] == "cached" and states["Pusher"] == "ran"
    assert second.status == "complete" and second.exit_code == 0
    assert second.pushed_to != first.pushed_to
    assert tf.saved_model.load(second.pushed_to).signatures  # loads
    assert not os.path.exists(first.pushed_to)
    assert os.path.isfile(os.path.join(f"{first.pushed_to}.broken", "model_card.md"))
    assert lines[0].startswith(f"pushed model {first.pushed_to} no longer holds what was pushed")
    assert f"moved aside to {first.pushed_to}.broken" in lines[0]
    assert lines[1] == f"no version of {os.path.dirname(first.pushed_to)} serves now"
    assert lines[2].startswith("the run report could not be written to ")
    assert len(lines) == 3

    lines.clear()  # the new push, its model card included, still holds what was pushed
    third = run_local(config, say=lines.append)
    assert {c.node: c.state for c in third.components}["Pusher"] == "cached"
    assert third.pushed_to == second.pushed_to
    assert len(lines) == 1 and lines[0].startswith("the run report could not be written to ")
