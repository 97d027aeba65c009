"""A pipeline with tuning and warm start: the Tuner's best values reach the Trainer through TFX's
hyperparameters channel (and ML Metadata), an unchanged re-run is answered from the cache, and the
next span's Trainer starts from the blessed model of the first, which `lineage model` shows."""

import dataclasses
import glob
import json
import os

import pytest

from components.trainer.config import TuningConfig
from components.trainer_module import TUNED_FILE, WARM_STARTED_FROM_PROPERTY
from components.tuner_module import BEST_PROPERTY_PREFIX
from pipeline.factory import BASELINE_NODE, DRIFT_BASELINE_NODE, WARM_START_NODE
from pipeline.lineage import model_lineage
from pipeline.lineage_format import format_model_lineage
from pipeline.local_runner import open_store, run_local
from tests.data_prep import image_files
from tests.pipeline.tiny_pipeline import tiny_config, write_images

pytestmark = pytest.mark.slow
LEARNING_RATES = (1e-3, 3e-3)


def _states(summary) -> dict[str, str]:
    return {component.node: component.state for component in summary.components}


def test_tuned_then_warm_started_on_the_next_span(tmp_path):
    images = write_images(tmp_path / "images")
    config = tiny_config(images, tmp_path / "build", warm_start=True, warm_start_epochs=2)
    config = dataclasses.replace(
        config,
        tuning=TuningConfig(
            enabled=True, max_trials=2, learning_rate=LEARNING_RATES, dropout=(0.2,)
        ),
    )

    first = run_local(config)
    assert _states(first)["Tuner"] == "ran" and first.pushed_to is not None
    store = open_store(config.metadata_path)
    (hyperparameters,) = store.get_artifacts_by_type("HyperParameters")
    best_rate = hyperparameters.custom_properties[BEST_PROPERTY_PREFIX + "learning_rate"]
    assert best_rate.double_value in LEARNING_RATES
    (tuned_file,) = glob.glob(
        os.path.join(config.pipeline_root, "Trainer", "model_run", "*", TUNED_FILE)
    )
    with open(tuned_file) as handle:
        assert json.load(handle)["learning_rate"] == best_rate.double_value
    (first_model,) = store.get_artifacts_by_type("Model")
    assert WARM_STARTED_FROM_PROPERTY not in first_model.custom_properties

    again = run_local(config)
    ran = {node for node, state in _states(again).items() if state != "cached"}
    assert ran <= {BASELINE_NODE, WARM_START_NODE, DRIFT_BASELINE_NODE}  # resolvers resolve

    (images / "cat" / "new.jpg").write_bytes(image_files.jpeg(seed=999))
    second = run_local(config)
    assert second.span == 2 and _states(second)["Trainer"] == "ran"
    second_model = store.get_artifacts_by_id([second.model_id])[0]
    warm_from = second_model.custom_properties[WARM_STARTED_FROM_PROPERTY].int_value
    assert warm_from == first_model.id
    newest_metrics = max(
        glob.glob(
            os.path.join(config.pipeline_root, "Trainer", "model_run", "*", "training_metrics.json")
        ),
        key=os.path.getmtime,
    )
    with open(newest_metrics) as handle:
        metrics = json.load(handle)
    assert metrics["phases"] == ["warm_start"] and metrics["epochs"] == 2
    lineage = model_lineage(store, second.model_id)
    assert [record.id for record in lineage.warm_started_from] == [first_model.id]
    assert f"Model {first_model.id}" in format_model_lineage(lineage)
