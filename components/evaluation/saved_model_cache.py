"""The trained SavedModel, loaded once per process for the Evaluator (TFMA, through
evaluation/evaluator.py) and EvaluationReportGen, and by the serving check's own process.

They load the trained model with TensorFlow alone, and in a local run the first two run in one
process; each load rebuilds the model's functions, so one load serves both. The load is the one
the serving check vouches for in a fresh process (tf.saved_model.load, no Keras), and its
duration is kept for the serving check's report.
A Model artifact's files never change, so the path names the model; the last two are kept:
the Evaluator scores the candidate and its baseline, and the other two then score the
candidate. TFLiteExport rebuilds the Keras model from its recorded architecture and variables
instead (export.rebuild_keras_model): freezing the restored network for TFLite is
several times slower than freezing the Keras model, more than the shared load would save.
"""

import dataclasses
import functools
import time

import tensorflow as tf


@dataclasses.dataclass(frozen=True)
class LoadedModel:
    model: tf.Module  # what tf.saved_model.load returned
    load_seconds: float  # how long that load took


@functools.lru_cache(maxsize=2)  # a candidate and its baseline
def load(saved_model_dir: str) -> LoadedModel:
    """tf.saved_model.load of `saved_model_dir`, the same object for the same path."""
    start = time.perf_counter()
    model = tf.saved_model.load(saved_model_dir)
    return LoadedModel(model, time.perf_counter() - start)
