"""The evaluation metrics a run summary shows, read from a ModelEvaluation artifact with TFMA's
own reader (TFMA loads when first asked)."""

from __future__ import annotations

import functools
import logging

HEADLINE_METRIC = "sparse_categorical_accuracy"
PER_CLASS_METRICS = ("precision", "recall")


@functools.lru_cache(maxsize=64)
def eval_accuracy(evaluation_uri: str) -> float | None:
    """The candidate model's accuracy on the overall slice of a ModelEvaluation artifact (not
    the baseline's, not a per-slice value, not a diff), read with TFMA's own reader."""
    import tensorflow_model_analysis as tfma

    tf_logger = logging.getLogger("tensorflow")
    level = tf_logger.level
    tf_logger.setLevel(logging.ERROR)  # TFMA's reader trips a TensorFlow deprecation notice
    try:
        for metrics in tfma.load_metrics(evaluation_uri):
            if metrics.slice_key.single_slice_keys:
                continue
            for entry in metrics.metric_keys_and_values:
                key = entry.key
                if (
                    key.name == HEADLINE_METRIC
                    and key.model_name != "baseline"
                    and not key.is_diff
                    and entry.value.HasField("double_value")
                ):
                    return entry.value.double_value.value
    finally:
        tf_logger.setLevel(level)
    return None


@functools.lru_cache(maxsize=64)
def per_class_metrics(evaluation_uri: str) -> dict[int, dict[str, float]]:
    """The candidate's precision and recall of each class (TFMA metrics binarized by class id)
    on the overall slice; NaN where undefined (a class never predicted has no precision)."""
    import tensorflow_model_analysis as tfma

    per_class: dict[int, dict[str, float]] = {}
    for metrics in tfma.load_metrics(evaluation_uri):
        if metrics.slice_key.single_slice_keys:
            continue
        for entry in metrics.metric_keys_and_values:
            key = entry.key
            if (
                key.name in PER_CLASS_METRICS
                and key.sub_key.HasField("class_id")
                and key.model_name != "baseline"
                and not key.is_diff
            ):
                values = per_class.setdefault(key.sub_key.class_id.value, {})
                values[key.name] = entry.value.double_value.value
    return {class_id: dict(sorted(per_class[class_id].items())) for class_id in sorted(per_class)}
