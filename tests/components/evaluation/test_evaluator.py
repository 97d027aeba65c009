"""The Evaluator's module: TFMA scores the very model object the other post-training scorers use,
described to TFMA exactly as its default loader describes it."""

import os

import pytest
import tensorflow_model_analysis as tfma

from components.evaluation import evaluator as evaluator_module
from components.evaluation import saved_model_cache
from components.training.export import EXAMPLES_SIGNATURE

pytestmark = pytest.mark.slow  # loads an exported SavedModel


def test_tfma_loads_the_shared_model_and_sees_what_its_default_loader_would(model_artifact):
    saved_model_dir = os.path.join(model_artifact.uri, "Format-Serving")
    spec = tfma.ModelSpec(signature_name=EXAMPLES_SIGNATURE, model_type=tfma.TF_GENERIC)
    config = tfma.utils.update_eval_config_with_defaults(
        tfma.EvalConfig(model_specs=[spec]), has_baseline=False
    )
    name = config.model_specs[0].name

    shared = evaluator_module.custom_eval_shared_model(saved_model_dir, name, config)
    default = tfma.default_eval_shared_model(
        eval_saved_model_path=saved_model_dir, model_name=name, eval_config=config
    )

    assert shared.model_loader.load() is saved_model_cache.load(saved_model_dir).model
    assert shared.model_loader.tags == default.model_loader.tags
    for field in ("model_name", "model_type", "model_path", "is_baseline", "rubber_stamp"):
        assert getattr(shared, field) == getattr(default, field)
    assert shared.model_type == tfma.TF_GENERIC
