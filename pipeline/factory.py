"""create_pipeline(): a pure factory from a validated config to a TFX pipeline.

It reads nothing and writes nothing; runners compute what needs the environment (such as the
input fingerprint) and bind the result to an orchestrator.
"""

from __future__ import annotations

import os
from collections.abc import Callable

import tensorflow_model_analysis as tfma
from tfx import v1 as tfx
from tfx.dsl.components.base import executor_spec

import components
from components.anomalies_gate import AnomaliesGate
from components.evaluation_report import EvaluationReportGen
from components.image_example_gen import ImageExampleGen
from components.model_card import ModelCardGen
from components.serving_check import ServingCheck
from components.tflite_export import TFLiteExport
from components.trainer.export import EXAMPLES_SIGNATURE
from components.trainer_module import TRAINER_CONFIG_KEY, TrainerExecutor, trainer_config_to_json
from components.transform_module import IMAGE_SIZE_KEY
from components.tuner_module import TUNING_CONFIG_KEY, Tuner, tuning_config_to_json
from data_prep import features
from pipeline import warm_start_strategy
from pipeline.baseline_strategy import (
    BLESSING_KEY,
    CANDIDATE_KEY,
    MODEL_KEY,
    BaselineBeforeCandidateStrategy,
)
from pipeline.config import PipelineConfig
from pipeline.data_snapshot import DataSnapshot
from pipeline.warm_start_strategy import BlessedBeforeExamplesStrategy

_COMPONENTS_DIR = os.path.dirname(components.__file__)
TRANSFORM_MODULE = os.path.join(_COMPONENTS_DIR, "transform_module.py")
TRAINER_MODULE = os.path.join(_COMPONENTS_DIR, "trainer_module.py")
TUNER_MODULE = os.path.join(_COMPONENTS_DIR, "tuner_module.py")
BASELINE_NODE = "baseline_model_resolver"
WARM_START_NODE = "warm_start_model_resolver"


def eval_config(min_accuracy: float, num_classes: int) -> tfma.EvalConfig:
    """Accuracy with an absolute floor and no regression against the baseline model, precision
    and recall of each class (by label id), a confusion matrix, and the example count."""
    accuracy_threshold = tfma.MetricThreshold(
        value_threshold=tfma.GenericValueThreshold(lower_bound={"value": min_accuracy}),
        change_threshold=tfma.GenericChangeThreshold(
            direction=tfma.MetricDirection.HIGHER_IS_BETTER, absolute={"value": -1e-10}
        ),
    )
    return tfma.EvalConfig(
        model_specs=[
            tfma.ModelSpec(
                signature_name=EXAMPLES_SIGNATURE,
                label_key=features.LABEL,
                prediction_key="probabilities",
            )
        ],
        slicing_specs=[tfma.SlicingSpec()],
        metrics_specs=[
            tfma.MetricsSpec(
                metrics=[
                    tfma.MetricConfig(class_name="ExampleCount"),
                    tfma.MetricConfig(
                        class_name="SparseCategoricalAccuracy", threshold=accuracy_threshold
                    ),
                    tfma.MetricConfig(class_name="MultiClassConfusionMatrixPlot"),
                ]
            ),
            tfma.MetricsSpec(
                metrics=[
                    tfma.MetricConfig(class_name="Precision"),
                    tfma.MetricConfig(class_name="Recall"),
                ],
                binarize=tfma.BinarizationOptions(class_ids={"values": range(num_classes)}),
            ),
        ],
    )


def baseline_before_candidate(candidate: tfx.dsl.Channel) -> tfx.dsl.Resolver:
    """The Evaluator's baseline: the newest blessed model trained before the candidate."""
    return tfx.dsl.Resolver(
        strategy_class=BaselineBeforeCandidateStrategy,
        **{
            CANDIDATE_KEY: candidate,
            MODEL_KEY: tfx.dsl.Channel(type=tfx.types.standard_artifacts.Model),
            BLESSING_KEY: tfx.dsl.Channel(type=tfx.types.standard_artifacts.ModelBlessing),
        },
    ).with_id(BASELINE_NODE)


def latest_blessed_baseline(candidate: tfx.dsl.Channel) -> tfx.dsl.Resolver:
    """TFX's LatestBlessedModelStrategy: the baseline Kubeflow V2 / Vertex can compile (they turn
    resolvers into metadata queries, so no custom strategy). An unchanged re-run there evaluates
    and pushes its cached model again, measured against itself."""
    del candidate  # the newest blessed model overall, whoever trained it
    return tfx.dsl.Resolver(
        strategy_class=tfx.dsl.experimental.LatestBlessedModelStrategy,
        **{
            MODEL_KEY: tfx.dsl.Channel(type=tfx.types.standard_artifacts.Model),
            BLESSING_KEY: tfx.dsl.Channel(type=tfx.types.standard_artifacts.ModelBlessing),
        },
    ).with_id(BASELINE_NODE)


def warm_start_model(examples: tfx.dsl.Channel) -> tfx.dsl.Resolver:
    """The Trainer's base_model: the newest blessed model trained on an earlier span."""
    return tfx.dsl.Resolver(
        strategy_class=BlessedBeforeExamplesStrategy,
        **{
            warm_start_strategy.EXAMPLES_KEY: examples,
            warm_start_strategy.MODEL_KEY: tfx.dsl.Channel(type=tfx.types.standard_artifacts.Model),
            warm_start_strategy.BLESSING_KEY: tfx.dsl.Channel(
                type=tfx.types.standard_artifacts.ModelBlessing
            ),
        },
    ).with_id(WARM_START_NODE)


def create_pipeline(
    config: PipelineConfig,
    data: DataSnapshot,
    code_fingerprint: str,
    baseline_resolver: Callable[[tfx.dsl.Channel], tfx.dsl.Resolver] = baseline_before_candidate,
) -> tfx.dsl.Pipeline:
    """Args:
    config: a validated PipelineConfig.
    data: the input's fingerprint (new images invalidate the cache), span and classes.
    code_fingerprint: code_fingerprint.code_fingerprint(); code edits invalidate the cache.
    baseline_resolver: builds the Evaluator's baseline resolver from the Trainer's model channel.
    """
    example_gen = ImageExampleGen(
        ingest_config=config.ingest.to_json(), input_fingerprint=data.fingerprint, span=data.span
    )
    statistics_gen = tfx.components.StatisticsGen(examples=example_gen.outputs["examples"])
    schema_gen = tfx.components.SchemaGen(statistics=statistics_gen.outputs["statistics"])
    example_validator = tfx.components.ExampleValidator(
        statistics=statistics_gen.outputs["statistics"], schema=schema_gen.outputs["schema"]
    )
    anomalies_gate = AnomaliesGate(anomalies=example_validator.outputs["anomalies"])
    transform = tfx.components.Transform(
        examples=example_gen.outputs["examples"],
        schema=schema_gen.outputs["schema"],
        module_file=TRANSFORM_MODULE,
        materialize=False,  # statistics only: decoded pixels are never written
        splits_config=tfx.proto.SplitsConfig(analyze=["train"]),
        custom_config={
            IMAGE_SIZE_KEY: config.trainer.image_size,
            "code_fingerprint": code_fingerprint,
        },
    )
    transform.add_upstream_node(anomalies_gate)  # no statistics from data that failed validation
    warm_start = (
        warm_start_model(example_gen.outputs["examples"]) if config.trainer.warm_start else None
    )
    tuner = (
        Tuner(
            module_file=TUNER_MODULE,
            examples=example_gen.outputs["examples"],
            transform_graph=transform.outputs["transform_graph"],
            schema=schema_gen.outputs["schema"],
            train_args=tfx.proto.TrainArgs(splits=["train"]),
            eval_args=tfx.proto.EvalArgs(splits=["eval"]),
            custom_config={
                TRAINER_CONFIG_KEY: trainer_config_to_json(config.trainer),
                TUNING_CONFIG_KEY: tuning_config_to_json(config.tuning),
                "code_fingerprint": code_fingerprint,
            },
        )
        if config.tuning.enabled
        else None
    )
    trainer = tfx.components.Trainer(
        module_file=TRAINER_MODULE,
        # Records the performance report on the Model artifact in MLMD.
        custom_executor_spec=executor_spec.ExecutorClassSpec(TrainerExecutor),
        examples=example_gen.outputs["examples"],
        transform_graph=transform.outputs["transform_graph"],
        schema=schema_gen.outputs["schema"],
        base_model=warm_start.outputs[warm_start_strategy.MODEL_KEY] if warm_start else None,
        hyperparameters=tuner.outputs["best_hyperparameters"] if tuner else None,
        train_args=tfx.proto.TrainArgs(splits=["train"]),
        eval_args=tfx.proto.EvalArgs(splits=["eval"]),
        custom_config={
            TRAINER_CONFIG_KEY: trainer_config_to_json(config.trainer),
            "code_fingerprint": code_fingerprint,
        },
    )
    baseline = baseline_resolver(trainer.outputs["model"])
    evaluator = tfx.components.Evaluator(
        examples=example_gen.outputs["examples"],
        model=trainer.outputs["model"],
        baseline_model=baseline.outputs[MODEL_KEY],
        example_splits=["eval"],
        eval_config=eval_config(config.min_accuracy, len(data.class_names)),
    )
    serving_check = ServingCheck(model=trainer.outputs["model"])
    tflite_export = TFLiteExport(
        model=trainer.outputs["model"],
        examples=example_gen.outputs["examples"],
        transform_graph=transform.outputs["transform_graph"],
    )
    evaluation_report = EvaluationReportGen(
        model=trainer.outputs["model"], examples=example_gen.outputs["examples"]
    )
    pusher = tfx.components.Pusher(
        model=trainer.outputs["model"],
        model_blessing=evaluator.outputs["blessing"],
        infra_blessing=serving_check.outputs["blessing"],  # both blessings or no push
        push_destination=tfx.proto.PushDestination(
            filesystem=tfx.proto.PushDestination.Filesystem(
                base_directory=os.path.join(config.serving_dir, config.name)
            )
        ),
    )
    model_card = ModelCardGen(
        model=trainer.outputs["model"],
        model_run=trainer.outputs["model_run"],
        examples=example_gen.outputs["examples"],
        transform_graph=transform.outputs["transform_graph"],
        evaluation=evaluator.outputs["evaluation"],
        model_blessing=evaluator.outputs["blessing"],
        infra_blessing=serving_check.outputs["blessing"],
        readable_evaluation=evaluation_report.outputs["report"],
        tflite=tflite_export.outputs["tflite"],
        pushed_model=pusher.outputs["pushed_model"],
    )
    return tfx.dsl.Pipeline(
        pipeline_name=config.name,
        pipeline_root=config.pipeline_root,
        components=[
            example_gen,
            statistics_gen,
            schema_gen,
            example_validator,
            anomalies_gate,
            transform,
            *([warm_start] if warm_start else []),
            *([tuner] if tuner else []),
            trainer,
            baseline,
            evaluator,
            serving_check,
            tflite_export,
            evaluation_report,
            pusher,
            model_card,
        ],
        enable_cache=config.enable_cache,
        metadata_connection_config=tfx.orchestration.metadata.sqlite_metadata_connection_config(
            config.metadata_path
        ),
        beam_pipeline_args=list(config.beam_args),
    )
