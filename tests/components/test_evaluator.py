"""The Evaluator executor sizes the per-class metrics from the Examples' label map."""

import json

import tensorflow_model_analysis as tfma
from tfx.components.evaluator import executor as tfx_evaluator
from tfx.types import standard_artifacts, standard_component_specs
from tfx.utils import proto_utils

from components.evaluator import LabelMapExecutor, with_class_ids
from components.metadata_keys import LABEL_MAP_PROPERTY
from pipeline.factory import eval_config


def _class_ids(config: tfma.EvalConfig) -> list[list[int]]:
    return [
        list(spec.binarize.class_ids.values)
        for spec in config.metrics_specs
        if spec.HasField("binarize")
    ]


def test_with_class_ids_fills_every_per_class_spec_and_keeps_the_rest():
    config = eval_config(min_accuracy=0.5)
    sized = with_class_ids(config, 3)
    assert _class_ids(sized) == [[0, 1, 2]]
    assert _class_ids(config) == [[]]  # the pipeline's own config is left as it was
    assert [s.metrics for s in sized.metrics_specs] == [s.metrics for s in config.metrics_specs]


def test_executor_hands_tfx_the_config_sized_to_the_label_map(monkeypatch):
    seen = {}
    monkeypatch.setattr(
        tfx_evaluator.Executor, "Do", lambda self, inputs, outputs, props: seen.update(props)
    )
    examples = standard_artifacts.Examples()
    # A folder of notes and one of corrupt files were left out: two classes, not four.
    examples.set_string_custom_property(LABEL_MAP_PROPERTY, json.dumps({"cat": 0, "dog": 1}))
    key = standard_component_specs.EVAL_CONFIG_KEY
    properties = {key: proto_utils.proto_to_json(eval_config(0.5)), "example_splits": "[]"}
    LabelMapExecutor().Do({standard_component_specs.EXAMPLES_KEY: [examples]}, {}, properties)
    handed = proto_utils.json_to_proto(seen[key], tfma.EvalConfig())
    assert _class_ids(handed) == [[0, 1]]
    assert seen["example_splits"] == "[]"
