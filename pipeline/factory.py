"""create_pipeline(): a pure factory from a validated config to a TFX pipeline.

It reads nothing and writes nothing; runners compute what needs the environment (such as the
input fingerprint) and bind the result to an orchestrator.
"""

from __future__ import annotations

import dataclasses
import json
import os
from collections.abc import Callable

import tensorflow_data_validation as tfdv
import tensorflow_model_analysis as tfma
import tfx.components
from ml_metadata.proto import metadata_store_pb2
from tfx.dsl.components.base import base_node, executor_spec
from tfx.dsl.components.common import importer, resolver
from tfx.dsl.input_resolution.strategies.latest_blessed_model_strategy import (
    LatestBlessedModelStrategy,
)
from tfx.orchestration.pipeline import Pipeline
from tfx.proto import distribution_validator_pb2, trainer_pb2, transform_pb2
from tfx.types import artifact_utils, standard_artifacts
from tfx.types.channel import Channel

from components.artifacts import IngestReport
from components.evaluation import evaluator as evaluator_module
from components.evaluation.evaluation_report import EvaluationReportGen
from components.ingest.image_example_gen import ImageExampleGen
from components.metadata_keys import (
    CODE_FINGERPRINT_KEY,
    MODEL_CARD_OUTPUT_KEY,
    TRAINER_CONFIG_KEY,
)
from components.serving.model_card import ModelCardGen
from components.serving.pusher import Pusher
from components.serving.serving_check import ServingCheck
from components.serving.tflite_export import TFLiteExport
from components.training import trainer as trainer_module
from components.training import transform as transform_module
from components.training import tuner as tuner_module
from components.training.export import EXAMPLES_SIGNATURE
from components.training.trainer import TrainerExecutor, trainer_config_to_json
from components.training.transform import IMAGE_SIZE_KEY
from components.training.tuner import TUNING_CONFIG_KEY, Tuner, tuning_config_to_json
from components.validation.curated_schema_gen import CuratedSchemaGen
from components.validation.data_gate import DataGate
from components.validation.data_health import DataHealthGen
from components.validation.distribution_validator import DRIFT_KEY, DistributionValidator
from data_prep.contract import features
from pipeline.code_fingerprint import OWN_PACKAGES
from pipeline.config.beam_options import resolve_beam_args
from pipeline.config.pipeline_config import GateConfig, PipelineConfig
from pipeline.training import warm_start_strategy
from pipeline.training.warm_start_strategy import BlessedBeforeExamplesStrategy
from pipeline.validation.baseline_strategy import (
    BLESSING_KEY,
    CANDIDATE_KEY,
    INGEST_REPORT_KEY,
    MODEL_KEY,
    STATISTICS_KEY,
    BaselineBeforeCandidateStrategy,
    BlessedTrainingStatisticsStrategy,
)
from pipeline.validation.data_snapshot import SCHEMA_NODE, SCHEMA_OUTPUT_KEY, DataSnapshot

# The user code by import path, not module_file: TFX then neither builds a wheel of components/
# nor pip-installs it in every executor and worker (the project is installed wherever the
# pipeline runs). TFX's module_file fingerprint is replaced by the fingerprint of each module's
# code (pipeline/code_fingerprint.py) in the settings of the component that runs it.
PREPROCESSING_FN = f"{transform_module.__name__}.{transform_module.preprocessing_fn.__name__}"
RUN_FN = f"{trainer_module.__name__}.{trainer_module.run_fn.__name__}"
TUNER_FN = f"{tuner_module.__name__}.{tuner_module.tuner_fn.__name__}"
BASELINE_NODE = "baseline_model_resolver"
WARM_START_NODE = "warm_start_model_resolver"
DRIFT_BASELINE_NODE = "drift_baseline_resolver"
SCHEMA_IMPORTER_NODE = "schema_importer"
DRIFT_SPLIT = "train"  # the split compared across spans (eval splits are small and noisy)


def eval_config(min_accuracy: float) -> tfma.EvalConfig:
    """Accuracy with an absolute floor and no regression against the baseline model, the loss, a
    confusion matrix, and the example count. Per-class metrics are EvaluationReportGen's, the one
    place they are computed.

    The model is TFMA's generic SavedModel, scored through its serving signature: without a
    model_type TFMA loads the model with Keras just to learn that it is a Keras model, then
    loads it with Keras again in every worker to add the metrics it was compiled with (a loss
    and a second accuracy), each load several seconds, most of the Evaluator's time on a small
    split. The loss is asked for here instead, computed from the same predictions."""
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
                model_type=tfma.TF_GENERIC,
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
                    tfma.MetricConfig(class_name="SparseCategoricalCrossentropy"),
                    tfma.MetricConfig(class_name="MultiClassConfusionMatrixPlot"),
                ]
            ),
        ],
    )


def statistics_options() -> tfdv.StatsOptions:
    """TFDV's defaults, but top values and unique counts from sketches (Misra-Gries, KMV) in its
    one combine pass instead of a Beam group-by per feature value: less CPU for StatisticsGen,
    and the same statistics for every feature the
    schema and the drift check read (top values exact up to 1,024 distinct values, unique
    counts up to 16,384). Only the image bytes' top values differ: one placeholder value
    counted once per image, where TFDV listed it once per image."""
    return tfdv.StatsOptions(use_sketch_based_topk_uniques=True)


def drift_config(gate: GateConfig) -> distribution_validator_pb2.DistributionValidatorConfig:
    """TFDV's drift comparators: class shares and format mix by L-infinity distance,
    thresholds from the config. Image sizes are numeric, which TFDV's L-infinity does not read:
    the data gate measures them (components/validation/size_drift.py)."""
    thresholds = {
        features.LABEL_NAME: ("infinity_norm", gate.class_distribution_linf),
        features.IMAGE_FORMAT: ("infinity_norm", gate.image_format_linf),
    }
    config = distribution_validator_pb2.DistributionValidatorConfig()
    for name, (metric, threshold) in thresholds.items():
        comparator = config.default_slice_config.feature.add()
        comparator.path.step.append(name)
        getattr(comparator.distribution_comparator, metric).threshold = threshold
    return config


def decided_schema(
    config: PipelineConfig, data: DataSnapshot, statistics: Channel
) -> tuple[base_node.BaseNode, Channel]:
    """The pipeline's schema node and its Schema channel: on its first span, CuratedSchemaGen
    over the span's statistics; later, an Importer of that very artifact (reimport=False finds
    it in ML Metadata, so the schema is one artifact for the pipeline's life and its consumers
    stay cached)."""
    if data.schema_uri is None:
        limits = config.ingest.limits  # no side is longer than max_side (or than max_pixels)
        max_side = limits.max_side or limits.max_pixels
        node = CuratedSchemaGen(statistics=statistics, max_side=max_side).with_id(SCHEMA_NODE)
        return node, node.outputs[SCHEMA_OUTPUT_KEY]
    node = importer.Importer(
        source_uri=data.schema_uri,
        artifact_type=standard_artifacts.Schema,
        reimport=False,
    ).with_id(SCHEMA_IMPORTER_NODE)
    return node, node.outputs[importer.IMPORT_RESULT_KEY]


def _over_blessed_models(strategy_class, node_id: str, **inputs: Channel) -> resolver.Resolver:
    """A resolver node that picks, by `strategy_class`, among every Model and ModelBlessing of the
    pipeline (the 'model' and 'model_blessing' inputs) and `inputs`."""
    return resolver.Resolver(
        strategy_class=strategy_class,
        **{
            MODEL_KEY: Channel(type=standard_artifacts.Model),
            BLESSING_KEY: Channel(type=standard_artifacts.ModelBlessing),
            **inputs,
        },
    ).with_id(node_id)


def drift_baseline(statistics: Channel) -> tuple[resolver.Resolver, Channel]:
    """The statistics of the data the newest blessed model was trained on (before this span):
    the node that resolves them (and that data's IngestReport, its output 'ingest_report'), and
    their channel."""
    node = _over_blessed_models(
        BlessedTrainingStatisticsStrategy,
        DRIFT_BASELINE_NODE,
        **{STATISTICS_KEY: statistics, INGEST_REPORT_KEY: Channel(type=IngestReport)},
    )
    return node, node.outputs[STATISTICS_KEY]


def imported_drift_baseline(
    uri: str,
) -> Callable[[Channel], tuple[importer.Importer, Channel]]:
    """A drift baseline given as the URI of an ExampleStatistics artifact (a StatisticsGen
    output folder, holding Split-train/): the baseline where the orchestrator can compile no
    custom resolver (Kubeflow V2 / Vertex)."""

    def baseline(statistics: Channel) -> tuple[importer.Importer, Channel]:
        del statistics  # the baseline is the given artifact, whatever this span is
        node = importer.Importer(
            source_uri=uri,
            artifact_type=standard_artifacts.ExampleStatistics,
            properties={"split_names": artifact_utils.encode_split_names([DRIFT_SPLIT])},
        ).with_id(DRIFT_BASELINE_NODE)
        return node, node.outputs[importer.IMPORT_RESULT_KEY]

    return baseline


def baseline_before_candidate(candidate: Channel) -> resolver.Resolver:
    """The Evaluator's baseline: the newest blessed model trained before the candidate."""
    return _over_blessed_models(
        BaselineBeforeCandidateStrategy, BASELINE_NODE, **{CANDIDATE_KEY: candidate}
    )


def latest_blessed_baseline(candidate: Channel) -> resolver.Resolver:
    """TFX's LatestBlessedModelStrategy: the baseline Kubeflow V2 / Vertex can compile (they turn
    resolvers into metadata queries, so no custom strategy). An unchanged re-run there evaluates
    and pushes its cached model again, measured against itself."""
    del candidate  # the newest blessed model overall, whoever trained it
    return _over_blessed_models(LatestBlessedModelStrategy, BASELINE_NODE)


def warm_start_model(examples: Channel) -> resolver.Resolver:
    """The Trainer's base_model: the newest blessed model trained on an earlier span."""
    return _over_blessed_models(
        BlessedBeforeExamplesStrategy,
        WARM_START_NODE,
        **{warm_start_strategy.EXAMPLES_KEY: examples},
    )


def carry_code_fingerprints(
    nodes: list[base_node.BaseNode], code_fingerprint: Callable[[str], str]
) -> None:
    """Gives each node whose executor is our code (a Python-function component's generated
    executor, a custom executor class: ImageExampleGen, CuratedSchemaGen, DataGate,
    ServingCheck, TFLiteExport, EvaluationReportGen, ModelCardGen) or that runs our module by
    its module_path (the Evaluator) the fingerprint of that module as an exec property: part of
    its cache key on every orchestrator (local, Airflow's legacy launcher, Vertex) and recorded
    on its executions. Nodes with a custom_config (Transform, Tuner, Trainer: TFX's components
    running our module code, and the Pusher with our executor) carry the fingerprint of their
    module there, set where they are built."""
    for node in nodes:
        spec = getattr(node, "executor_spec", None)
        module = node.exec_properties.get("module_path") or getattr(
            getattr(spec, "executor_class", None), "__module__", ""
        )
        if module.split(".")[0] in OWN_PACKAGES and "custom_config" not in node.exec_properties:
            node.exec_properties[CODE_FINGERPRINT_KEY] = code_fingerprint(module)


def create_pipeline(
    config: PipelineConfig,
    data: DataSnapshot,
    code_fingerprint: Callable[[str], str],
    metadata_connection_config: metadata_store_pb2.ConnectionConfig | None,
    baseline_resolver: Callable[[Channel], resolver.Resolver] = baseline_before_candidate,
    drift_baseline_node: Callable[[Channel], tuple[base_node.BaseNode, Channel]]
    | None = drift_baseline,
) -> Pipeline:
    """Args:
    config: a validated PipelineConfig.
    data: the input's fingerprint (new images invalidate the cache) and span.
    code_fingerprint: a module's name -> the fingerprint of its code (code_fingerprint.
      code_fingerprint): each component carries the one of the module it runs, so an edit to
      that code invalidates its cache and nothing else's.
    metadata_connection_config: the ML Metadata store the run writes (SQLite, MySQL); None where
      the orchestrator owns the store (Kubeflow V2 / Vertex).
    baseline_resolver: builds the Evaluator's baseline resolver from the Trainer's model channel.
    drift_baseline_node: builds the drift check's baseline (node, channel) from the statistics
      channel: a resolver, or an importer where no custom resolver compiles
      (imported_drift_baseline);
      None leaves the check out (a Vertex compile of a first span: nothing to compare with).
    """
    example_gen = ingest(config, data)
    validated = validation(config, data, example_gen, drift_baseline_node)
    trained = training(config, example_gen, validated, code_fingerprint)
    evaluated = evaluation(config, example_gen, trained.trainer, baseline_resolver)
    nodes = [
        example_gen,
        *validated.nodes,
        *trained.nodes,
        *evaluated.nodes,
        *serving(config, example_gen, trained.trainer, evaluated, code_fingerprint),
    ]
    carry_code_fingerprints(nodes, code_fingerprint)
    return Pipeline(
        pipeline_name=config.name,
        pipeline_root=config.pipeline_root,
        components=nodes,
        enable_cache=config.enable_cache,
        metadata_connection_config=metadata_connection_config,
        beam_pipeline_args=list(resolve_beam_args(config.beam_args, data.files)),
    )


def ingest(config: PipelineConfig, data: DataSnapshot) -> ImageExampleGen:
    """The span's images as Examples, numbered and fingerprinted by the snapshot."""
    return ImageExampleGen(
        ingest_config=config.ingest.to_json(),
        input_fingerprint=data.fingerprint,
        span=data.span,
        reference_label_map=json.dumps(data.reference_label_map, sort_keys=True),
        previous_source_index=data.previous_source_index,
    )


@dataclasses.dataclass(frozen=True)
class Validated:
    """The validation stage's nodes (statistics, schema, anomalies, drift, the data gate), the
    decided schema, and the gate that later stages wait for."""

    nodes: list[base_node.BaseNode]
    schema: Channel
    gate: DataGate


def validation(
    config: PipelineConfig,
    data: DataSnapshot,
    example_gen: ImageExampleGen,
    drift_baseline_node: Callable[[Channel], tuple[base_node.BaseNode, Channel]] | None,
) -> Validated:
    """Statistics, the decided schema, the anomalies against it, the drift check against the
    blessed model's data (unless drift_baseline_node is None) and the data gate over them."""
    statistics_gen = tfx.components.StatisticsGen(
        examples=example_gen.outputs["examples"], stats_options=statistics_options()
    )
    statistics = statistics_gen.outputs["statistics"]
    schema_node, schema = decided_schema(config, data, statistics)
    example_validator = tfx.components.ExampleValidator(statistics=statistics, schema=schema)
    drift_nodes, baseline, baseline_report = [], None, None
    if drift_baseline_node is not None:
        baseline_node, baseline = drift_baseline_node(statistics)
        # An imported baseline (Vertex) has statistics only: the whole split's sizes, no brightness.
        baseline_report = baseline_node.outputs.get(INGEST_REPORT_KEY)
        distribution_validator = DistributionValidator(
            statistics=statistics,
            # Optional: without a blessed model there is nothing to compare with (it passes).
            baseline_statistics=baseline.as_optional(),
            config=drift_config(config.gate),
            split_pairs=[(DRIFT_SPLIT, DRIFT_SPLIT)],
        )
        drift_nodes = [baseline_node, distribution_validator]
    data_gate = DataGate(
        anomalies=example_validator.outputs["anomalies"],
        drift_anomalies=drift_nodes[-1].outputs[DRIFT_KEY] if drift_nodes else None,
        ingest_report=example_gen.outputs["ingest_report"],
        reference_label_map=json.dumps(data.reference_label_map, sort_keys=True),
        allow_class_changes=config.gate.allow_class_changes,
        pipeline=config.name,
        statistics=statistics,
        baseline_statistics=baseline.as_optional() if baseline is not None else None,
        drift_split=DRIFT_SPLIT,
        image_size_share=config.gate.image_size_share,
        brightness_share=config.gate.brightness_share,
        baseline_ingest_report=None if baseline_report is None else baseline_report.as_optional(),
        max_near_duplicate_fraction=config.gate.max_near_duplicate_fraction,
    )
    nodes = [statistics_gen, schema_node, example_validator, *drift_nodes, data_gate]
    return Validated(nodes, schema, data_gate)


@dataclasses.dataclass(frozen=True)
class Trained:
    """The training stage's nodes (Transform, the warm start and the Tuner when asked, the
    Trainer) and the Trainer, whose model later stages take."""

    nodes: list[base_node.BaseNode]
    trainer: base_node.BaseNode


def training(
    config: PipelineConfig,
    example_gen: ImageExampleGen,
    validated: Validated,
    code_fingerprint: Callable[[str], str],
) -> Trained:
    """Transform's statistics after the gate, then the Trainer, warm-started from the newest
    blessed model and tuned when the config asks."""
    examples, schema = example_gen.outputs["examples"], validated.schema
    transform = tfx.components.Transform(
        examples=examples,
        schema=schema,
        preprocessing_fn=PREPROCESSING_FN,
        materialize=False,  # statistics only: decoded pixels are never written
        # StatisticsGen has the data's statistics; Transform's own pre- and post-transform
        # TFDV passes are a large share of its time, and nothing reads them.
        disable_statistics=True,
        # No analyzer cache: nothing feeds it back (an analyzer_cache input), and writing it
        # adds four TFRecord writes, each a few Beam stages, to every run.
        disable_analyzer_cache=True,
        force_tf_compat_v1=transform_module.FORCE_TF_COMPAT_V1,
        splits_config=transform_pb2.SplitsConfig(analyze=["train"]),
        custom_config={
            IMAGE_SIZE_KEY: config.trainer.image_size,
            CODE_FINGERPRINT_KEY: code_fingerprint(transform_module.__name__),
        },
    )
    transform.add_upstream_node(validated.gate)  # no statistics from data that failed the gate
    warm_start = warm_start_model(examples) if config.trainer.warm_start else None
    tuner = _tuner(config, examples, transform, schema, code_fingerprint)
    trainer = tfx.components.Trainer(
        run_fn=RUN_FN,
        # Records the performance report on the Model artifact in MLMD.
        custom_executor_spec=executor_spec.ExecutorClassSpec(TrainerExecutor),
        examples=examples,
        transform_graph=transform.outputs["transform_graph"],
        schema=schema,
        base_model=warm_start.outputs[MODEL_KEY] if warm_start else None,
        hyperparameters=tuner.outputs["best_hyperparameters"] if tuner else None,
        train_args=trainer_pb2.TrainArgs(splits=["train"]),
        eval_args=trainer_pb2.EvalArgs(splits=["eval"]),
        custom_config={
            TRAINER_CONFIG_KEY: trainer_config_to_json(config.trainer),
            CODE_FINGERPRINT_KEY: code_fingerprint(trainer_module.__name__),
        },
    )
    optional = [node for node in (warm_start, tuner) if node is not None]
    return Trained([transform, *optional, trainer], trainer)


def _tuner(
    config: PipelineConfig,
    examples: Channel,
    transform: base_node.BaseNode,
    schema: Channel,
    code_fingerprint: Callable[[str], str],
) -> Tuner | None:
    """The hyperparameter search whose best values the Trainer takes; None unless enabled."""
    if not config.tuning.enabled:
        return None
    return Tuner(
        tuner_fn=TUNER_FN,
        examples=examples,
        transform_graph=transform.outputs["transform_graph"],
        schema=schema,
        train_args=trainer_pb2.TrainArgs(splits=["train"]),
        eval_args=trainer_pb2.EvalArgs(splits=["eval"]),
        custom_config={
            TRAINER_CONFIG_KEY: trainer_config_to_json(config.trainer),
            TUNING_CONFIG_KEY: tuning_config_to_json(config.tuning),
            CODE_FINGERPRINT_KEY: code_fingerprint(tuner_module.__name__),
        },
    )


@dataclasses.dataclass(frozen=True)
class Evaluated:
    """The evaluation stage's nodes in order, and those the serving stage reads."""

    nodes: list[base_node.BaseNode]
    evaluator: base_node.BaseNode
    serving_check: ServingCheck
    report: EvaluationReportGen
    data_health: DataHealthGen
    tflite_export: TFLiteExport


def evaluation(
    config: PipelineConfig,
    example_gen: ImageExampleGen,
    trainer: base_node.BaseNode,
    baseline_resolver: Callable[[Channel], resolver.Resolver],
) -> Evaluated:
    """The blessing (against the baseline model), the serving check, the readable report, the
    data health over its probabilities and the TFLite export compared with its scores."""
    examples, model = example_gen.outputs["examples"], trainer.outputs["model"]
    baseline = baseline_resolver(model)
    evaluator = tfx.components.Evaluator(
        examples=examples,
        model=model,
        baseline_model=baseline.outputs[MODEL_KEY],
        example_splits=["eval"],
        eval_config=eval_config(config.min_accuracy),
        module_path=evaluator_module.__name__,  # TFMA loads the model through the shared cache
    )
    serving_check = ServingCheck(model=model)
    report = EvaluationReportGen(model=model, examples=examples)
    data_health = DataHealthGen(  # label errors from the probabilities the report stored
        examples=examples,
        ingest_report=example_gen.outputs["ingest_report"],
        readable_evaluation=report.outputs["report"],
    )
    tflite_export = TFLiteExport(  # compared with the SavedModel scores the report stored
        model=model,
        examples=examples,
        readable_evaluation=report.outputs["report"],
        int8_max_accuracy_gap_points=config.int8_max_accuracy_gap_points,
    )
    nodes = [baseline, evaluator, serving_check, report, data_health, tflite_export]
    return Evaluated(nodes, evaluator, serving_check, report, data_health, tflite_export)


def serving(
    config: PipelineConfig,
    example_gen: ImageExampleGen,
    trainer: base_node.BaseNode,
    evaluated: Evaluated,
    code_fingerprint: Callable[[str], str],
) -> list[base_node.BaseNode]:
    """The model card over everything the run made, then the Pusher (only with both blessings),
    which puts the card's folder beside the model in the version it pushes: the last write."""
    model = trainer.outputs["model"]
    model_card = ModelCardGen(
        model=model,
        model_run=trainer.outputs["model_run"],
        examples=example_gen.outputs["examples"],
        ingest_report=example_gen.outputs["ingest_report"],
        evaluation=evaluated.evaluator.outputs["evaluation"],
        model_blessing=evaluated.evaluator.outputs["blessing"],
        infra_blessing=evaluated.serving_check.outputs["blessing"],
        readable_evaluation=evaluated.report.outputs["report"],
        tflite=evaluated.tflite_export.outputs["tflite"],
        data_health=evaluated.data_health.outputs["data_health"],
    )
    pusher = Pusher(  # copies, verifies in a fresh process, then renames into place
        model=model,
        model_blessing=evaluated.evaluator.outputs["blessing"],
        infra_blessing=evaluated.serving_check.outputs["blessing"],  # both blessings or no push
        model_card=model_card.outputs[MODEL_CARD_OUTPUT_KEY],
        base_directory=os.path.join(config.serving_dir, config.name),
        custom_config={CODE_FINGERPRINT_KEY: code_fingerprint(Pusher.__module__)},
    )
    return [model_card, pusher]
