"""The Evaluator's module code (TFX's module_path): TFMA gets the models it scores from
saved_model_cache, the load EvaluationReportGen shares.

TFMA's own loader calls tf.saved_model.load in its scoring DoFn's setup, the same load the
post-training components make (the larger part of each of their fixed costs), so a
local run, whose Beam jobs run in this process, loaded the trained SavedModel twice. Through this
loader it loads it once for all three. On Beam worker processes or a distributed runner each
worker loads the model itself, as TFMA's loader does; only the scoring path differs from
TFMA's default, not what is scored.
"""

import functools

import tensorflow as tf
import tensorflow_model_analysis as tfma

from components.evaluation import saved_model_cache


def _shared_load(saved_model_dir: str) -> tf.Module:
    return saved_model_cache.load(saved_model_dir).model


def custom_eval_shared_model(
    eval_saved_model_path: str, model_name: str, eval_config: tfma.EvalConfig, **kwargs
) -> tfma.types.EvalSharedModel:
    """TFMA's default EvalSharedModel of the model, loaded through the shared cache (the hook
    TFX's Evaluator calls for each model it scores, the candidate and the baseline)."""
    return tfma.default_eval_shared_model(
        eval_saved_model_path=eval_saved_model_path,
        model_name=model_name,
        eval_config=eval_config,
        custom_model_loader=tfma.types.ModelLoader(
            construct_fn=functools.partial(_shared_load, eval_saved_model_path),
            tags=[tf.saved_model.SERVING],
        ),
        **kwargs,
    )
