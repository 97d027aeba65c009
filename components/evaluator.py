"""The Evaluator, sized to the classes the ingest accepted.

The pipeline is built before any image is read, so the number of classes cannot be in its
eval_config: a class folder whose every file is rejected is no class of the model. This executor
reads the label map of the Examples it evaluates (recorded by ImageExampleGen) and binarizes the
per-class metrics over exactly those label ids before TFX's Evaluator runs.
"""

from __future__ import annotations

import tensorflow_model_analysis as tfma
from tfx.components.evaluator import component, executor
from tfx.dsl.components.base import executor_spec
from tfx.types import standard_component_specs
from tfx.utils import proto_utils

from components.image_example_gen import label_map_of


def with_class_ids(eval_config: tfma.EvalConfig, num_classes: int) -> tfma.EvalConfig:
    """A copy whose per-class metrics specs (those with a binarize field) cover label ids
    0..num_classes-1."""
    sized = tfma.EvalConfig()
    sized.CopyFrom(eval_config)
    for spec in sized.metrics_specs:
        if spec.HasField("binarize"):
            spec.binarize.class_ids.values[:] = range(num_classes)
    return sized


class LabelMapExecutor(executor.Executor):
    """TFX's Evaluator executor with per-class metrics over the input Examples' label map."""

    def Do(self, input_dict, output_dict, exec_properties) -> None:  # noqa: N802 (TFX's name)
        key = standard_component_specs.EVAL_CONFIG_KEY
        examples = input_dict[standard_component_specs.EXAMPLES_KEY]
        num_classes = len(label_map_of(examples[0]))
        eval_config = proto_utils.json_to_proto(exec_properties[key], tfma.EvalConfig())
        sized = with_class_ids(eval_config, num_classes)
        super().Do(
            input_dict, output_dict, {**exec_properties, key: proto_utils.proto_to_json(sized)}
        )


class Evaluator(component.Evaluator):
    """TFX's Evaluator (same node id, inputs and outputs) running LabelMapExecutor; TFX's
    Evaluator takes no custom_executor_spec argument, so the spec is the class's."""

    EXECUTOR_SPEC = executor_spec.BeamExecutorSpec(LabelMapExecutor)
