"""A pipeline run killed during training resumes from the Trainer's last checkpoint when the
pipeline is run again: the upstream components come from the cache, so the Trainer's inputs and
therefore its checkpoint folder are the same."""

import glob
import json
import os
import signal
import subprocess
import sys
import time

import pytest
import tensorflow as tf

from pipeline.runners.local import run_local
from tests.pipeline.tiny_pipeline import tiny_config, write_images

pytestmark = pytest.mark.slow
EPOCHS = 60  # ~6 steps each on this data: long enough to be killed mid-training
CHECKPOINT_EVERY = 4

_RUN = """
import sys
from pipeline.runners.local import run_local
from tests.e2e.test_trainer_resume import _config
run_local(_config(*sys.argv[1:]))
"""


def _config(images, build):
    return tiny_config(images, build, epochs=EPOCHS, checkpoint_every_steps=CHECKPOINT_EVERY)


def _latest_checkpoint_step(pipeline_root: str) -> int:
    steps = [0]
    for folder in glob.glob(os.path.join(pipeline_root, "Trainer", "checkpoints", "*")):
        latest = tf.train.latest_checkpoint(folder)
        if latest:
            steps.append(int(latest.rsplit("-", 1)[-1]))
    return max(steps)


def test_a_pipeline_killed_in_training_resumes_on_the_next_run(tmp_path):
    images = write_images(tmp_path / "images")
    build = tmp_path / "build"
    config = _config(images, build)
    child = subprocess.Popen(
        [sys.executable, "-c", _RUN, str(images), str(build)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 600
    while (
        _latest_checkpoint_step(config.pipeline_root) < 2 * CHECKPOINT_EVERY
        and child.poll() is None
        and time.monotonic() < deadline
    ):
        time.sleep(0.2)
    assert child.poll() is None, "the pipeline ended before it could be killed"
    os.kill(child.pid, signal.SIGKILL)
    child.wait()
    killed_at = _latest_checkpoint_step(config.pipeline_root)
    assert killed_at >= 2 * CHECKPOINT_EVERY

    summary = run_local(config)
    states = {c.node: c.state for c in summary.components}
    assert states["Transform"] == "cached" and states["Trainer"] == "ran"
    (metrics_file,) = glob.glob(
        os.path.join(config.pipeline_root, "Trainer", "model_run", "*", "training_metrics.json")
    )
    with open(metrics_file) as handle:
        metrics = json.load(handle)
    assert metrics["resumed_from_step"] == killed_at
    assert metrics["optimizer_steps"] == EPOCHS * metrics["steps_per_epoch"]
    assert summary.pushed_to is not None
    # Checkpoints are removed once the model is exported: a later forced re-run starts afresh.
    assert not glob.glob(os.path.join(config.pipeline_root, "Trainer", "checkpoints", "*", "*"))
