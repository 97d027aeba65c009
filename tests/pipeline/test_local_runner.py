"""The whole pipeline end to end on tiny data with the local runner: every component runs, the
model is blessed and pushed and answers raw JPEG bytes, re-runs come from the cache, changes
invalidate exactly what they should, and a model below the threshold is not pushed."""

import dataclasses

import numpy as np
import pytest
import tensorflow as tf

from components.trainer.config import runlocal
from components.trainer.export import IMAGES_SIGNATURE
from pipeline import local_runner
from pipeline.config import local_preset
from pipeline.local_runner import open_store, run_local, summarize_latest_run
from tests.data_prep import image_files
from tests.pipeline.expected import COMPONENTS

pytestmark = pytest.mark.slow
IN_PROCESS = ("--direct_running_mode=in_memory", "--direct_num_workers=1")
LABELS = ("cat", "dog", "owl")


def _states(summary) -> dict[str, str]:
    return {c.node: c.state for c in summary.components}


@pytest.fixture(scope="module")
def first_run(tmp_path_factory):
    root = tmp_path_factory.mktemp("local")
    images = root / "images"
    for label_index, label in enumerate(LABELS):
        for i in range(10):
            path = images / label / f"{i}.jpg"
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(image_files.jpeg(seed=100 * label_index + i))
    config = dataclasses.replace(
        local_preset(str(images), str(root / "build")),
        beam_args=IN_PROCESS,
        trainer=runlocal(),
        min_accuracy=0.0,  # runlocal learns nothing; the threshold test below raises it
    )
    return config, images, run_local(config)


def test_first_run_runs_every_component_and_pushes_a_blessed_model(first_run):
    _, _, summary = first_run
    assert sorted(_states(summary).items()) == sorted((name, "ran") for name in COMPONENTS)
    assert summary.blessed is True
    assert 0.0 <= summary.eval_accuracy <= 1.0
    assert summary.pushed_to is not None
    # The Trainer's performance report, read back from the Model artifact in MLMD.
    performance = summary.training_performance
    assert performance["retraces"] == 0 and performance["replicas"] == 1
    assert performance["precision"] == "float32" and performance["xla"] == 0
    assert performance["global_batch_size"] == runlocal().batch_size


def test_pushed_model_classifies_raw_jpeg_bytes(first_run):
    _, images, summary = first_run
    model = tf.saved_model.load(summary.pushed_to)
    raw = tf.constant([(images / "dog" / "3.jpg").read_bytes(), image_files.png(seed=5)])
    outputs = model.signatures[IMAGES_SIGNATURE](images=raw)
    probabilities = outputs["probabilities"].numpy()
    assert probabilities.shape == (2, len(LABELS))
    np.testing.assert_allclose(probabilities.sum(axis=1), 1.0, rtol=1e-5)
    assert {name.decode() for name in outputs["class_names"].numpy()} <= set(LABELS)


def test_reruns_use_the_cache_and_changes_invalidate_exactly_what_they_should(
    first_run, monkeypatch
):
    config, images, first = first_run
    again = run_local(config)
    assert again.run_id != first.run_id
    states = _states(again)
    for name in ("ImageExampleGen", "StatisticsGen", "SchemaGen", "Transform", "Trainer"):
        assert states[name] == "cached", states
    # The Evaluator's inputs did change: the resolver now supplies the first run's blessed model
    # as the baseline, so it evaluates again (against a baseline equal to the candidate).
    assert again.blessed is True

    # An edit to the project's code (invisible to TFX's module_file fingerprint when it is in an
    # imported module) re-runs what runs that code, not the data components.
    monkeypatch.setattr(local_runner, "code_fingerprint", lambda: "edited code")
    edited = _states(run_local(config))
    assert edited["Transform"] == edited["Trainer"] == "ran"
    assert edited["ImageExampleGen"] == edited["StatisticsGen"] == "cached"

    (images / "cat" / "0.jpg").write_bytes(image_files.jpeg(seed=999))
    changed = _states(run_local(config))
    assert changed["ImageExampleGen"] == changed["Transform"] == changed["Trainer"] == "ran"


def test_a_model_below_the_threshold_is_not_pushed(first_run):
    config, _, _ = first_run
    strict = run_local(dataclasses.replace(config, min_accuracy=1.0))
    assert _states(strict)["Evaluator"] == "ran"
    assert strict.blessed is False
    assert strict.pushed_to is None


def test_summary_of_an_empty_store_is_a_clear_error(tmp_path):
    with pytest.raises(LookupError, match="no runs of pipeline 'imgpipe'"):
        summarize_latest_run(open_store(str(tmp_path / "m.db")), "imgpipe")
