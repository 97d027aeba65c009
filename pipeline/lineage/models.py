"""Where a model came from and what was made from a dataset: upstream from a (pushed) model to
its Trainer, transform graph, examples and ingest; downstream from examples to the models trained
on them."""

from __future__ import annotations

import dataclasses

from ml_metadata.metadata_store import metadata_store
from ml_metadata.proto import metadata_store_pb2 as mlmd_pb2

from components import metadata_keys
from components.ingest.ingest_report_reader import IngestReportRecord
from pipeline.lineage.metrics import eval_accuracy
from pipeline.lineage.store import (
    ArtifactRecord,
    Edge,
    ExecutionRecord,
    LineageError,
    MetadataGraph,
    custom_config,
    parsed_json,
    read_json,
    same_file,
)


@dataclasses.dataclass(frozen=True)
class Dataset:
    """An Examples artifact with what ImageExampleGen recorded about it."""

    examples: ArtifactRecord
    span: int | None
    split_counts: dict
    label_map: dict
    totals: dict  # found, accepted, rejected, ignored
    rejected_per_reason: dict
    ingest_report: ArtifactRecord | None
    example_gen: ExecutionRecord | None
    input: str | None
    input_fingerprint: str | None


@dataclasses.dataclass(frozen=True)
class Evaluation:
    evaluator: ExecutionRecord
    blessed: bool | None
    accuracy: float | None
    baseline_model_id: int | None  # named, not followed


@dataclasses.dataclass(frozen=True)
class ModelLineage:
    pushed_model: ArtifactRecord | None
    pusher: ExecutionRecord | None
    model: ArtifactRecord
    trainer: ExecutionRecord
    trainer_config: dict
    code_fingerprint: str | None
    evaluation: Evaluation | None
    transform_graph: ArtifactRecord | None
    transform: ExecutionRecord | None
    dataset: Dataset
    edges: tuple[Edge, ...]
    # The models it was warm-started from, nearest first (its Trainer's base_model, that model's
    # Trainer's base_model, ...); empty when it was trained from scratch.
    warm_started_from: tuple[ArtifactRecord, ...] = ()


@dataclasses.dataclass(frozen=True)
class TrainedModel:
    model: ArtifactRecord
    trainer: ExecutionRecord
    runs: tuple[str, ...]  # every run that produced or reused it
    blessed: bool | None
    pushed_to: tuple[str, ...]


@dataclasses.dataclass(frozen=True)
class ExamplesLineage:
    dataset: Dataset
    models: tuple[TrainedModel, ...]


def read_dataset(
    graph: MetadataGraph, examples: mlmd_pb2.Artifact, edges: list[Edge] | None
) -> Dataset:
    record = graph.record(examples)
    producer = graph.producer(examples.id, "examples")
    example_gen = graph.execution(producer) if producer else None
    report, report_record, ingest, ingest_config = {}, None, None, {}
    if producer is not None:
        if edges is not None:
            edges.append(Edge(example_gen.label, record.label, "examples"))
        reports = graph.outputs(producer.id, metadata_keys.INGEST_REPORT_OUTPUT_KEY)
        ingest_config = example_gen.properties.get(metadata_keys.INGEST_CONFIG_PARAMETER) or {}
        if reports:
            report_record = graph.record(reports[0])
            ingest = IngestReportRecord.read(reports[0])
            if edges is not None:
                edges.append(
                    Edge(
                        example_gen.label,
                        report_record.label,
                        metadata_keys.INGEST_REPORT_OUTPUT_KEY,
                    )
                )
            report = read_json(ingest.report_path)
    label_map = report.get("label_map") or (ingest.label_map if ingest else {})
    return Dataset(
        examples=record,
        span=record.properties.get("span"),
        split_counts=report.get("accepted_per_split", {}),
        label_map=label_map,
        totals=report.get("totals", {}),
        rejected_per_reason=report.get("rejected_per_reason", {}),
        ingest_report=report_record,
        example_gen=example_gen,
        input=ingest_config.get("input") if isinstance(ingest_config, dict) else None,
        input_fingerprint=record.properties.get(metadata_keys.INPUT_FINGERPRINT_PROPERTY),
    )


def _evaluation(
    graph: MetadataGraph, evaluator: mlmd_pb2.Execution, edges: list[Edge]
) -> Evaluation:
    record = graph.execution(evaluator)
    blessings = graph.outputs(evaluator.id, "blessing")
    evaluations = graph.outputs(evaluator.id, "evaluation")
    baselines = graph.inputs(evaluator.id, "baseline_model")
    blessed = None
    if blessings and metadata_keys.BLESSED_PROPERTY in blessings[0].custom_properties:
        blessed = bool(blessings[0].custom_properties[metadata_keys.BLESSED_PROPERTY].int_value)
        edges.append(Edge(record.label, graph.record(blessings[0]).label, "blessing"))
    return Evaluation(
        evaluator=record,
        blessed=blessed,
        accuracy=eval_accuracy(evaluations[0].uri) if evaluations else None,
        baseline_model_id=baselines[0].id if baselines else None,
    )


def latest_pushed_model(store: metadata_store.MetadataStore) -> int:
    graph = MetadataGraph(store)
    pushed = [a for a in graph.artifacts_of_type("PushedModel") if _was_pushed(a)]
    if not pushed:
        raise LineageError("no pushed model in this metadata store")
    return max(pushed, key=lambda a: (a.create_time_since_epoch, a.id)).id


def _was_pushed(artifact: mlmd_pb2.Artifact) -> bool:
    """Pushed, and its folder still holds it (a broken push is DELETED before the next run)."""
    return artifact.state == mlmd_pb2.Artifact.LIVE and bool(
        artifact.custom_properties[metadata_keys.PUSHED_PROPERTY].int_value
    )


def find_model(store: metadata_store.MetadataStore, reference: str) -> int:
    """An artifact id, or the folder a model was pushed to (what a server loads)."""
    if reference.isdigit():
        return int(reference)
    for artifact in MetadataGraph(store).artifacts_of_type("PushedModel"):
        destination = artifact.custom_properties[
            metadata_keys.PUSHED_DESTINATION_PROPERTY
        ].string_value
        if destination and same_file(destination, reference.rstrip("/")):
            return artifact.id
    raise LineageError(f"{reference!r} is neither an artifact id nor a pushed model's folder")


def model_lineage(store: metadata_store.MetadataStore, artifact_id: int) -> ModelLineage:
    """A PushedModel or Model upstream: pushed model -> model -> Trainer (settings, code) ->
    transform graph -> examples -> ImageExampleGen (input, files, fingerprint); and the
    evaluation that blessed it, whose baseline is named but not followed."""
    graph = MetadataGraph(store)
    artifact = graph.artifact(artifact_id, ("PushedModel", "Model"))
    edges: list[Edge] = []
    pushed_model = pusher = evaluation = None
    if graph.artifact_types[artifact.type_id] == "PushedModel":
        pushed_model = graph.record(artifact)
        pusher_execution = graph.producer(artifact.id, "pushed_model")
        if pusher_execution is None:
            raise LineageError(f"pushed model {artifact.id} has no recorded Pusher execution")
        pusher = graph.execution(pusher_execution)
        edges.append(Edge(pusher.label, pushed_model.label, "pushed_model"))
        models = graph.inputs(pusher_execution.id, "model")
        if not models:
            raise LineageError(f"pushed model {artifact.id}: its Pusher recorded no model")
        model = models[0]
        edges.append(Edge(graph.record(model).label, pusher.label, "model"))
        for blessing in graph.inputs(pusher_execution.id, "model_blessing"):
            edges.append(Edge(graph.record(blessing).label, pusher.label, "model_blessing"))
            evaluator = graph.producer(blessing.id, "blessing")
            if evaluator is not None:
                evaluation = _evaluation(graph, evaluator, edges)
                edges.append(Edge(graph.record(model).label, evaluation.evaluator.label, "model"))
    else:
        model = artifact
        evaluators = [
            e for e in graph.consumers(model.id, "model") if graph.outputs(e.id, "blessing")
        ]
        if evaluators:
            evaluation = _evaluation(graph, evaluators[-1], edges)
            edges.append(Edge(graph.record(model).label, evaluation.evaluator.label, "model"))
    model_record = graph.record(model)
    trainer_execution = graph.producer(model.id, "model")
    if trainer_execution is None:
        raise LineageError(f"model {model.id} has no recorded Trainer execution")
    trainer = graph.execution(trainer_execution)
    edges.append(Edge(trainer.label, model_record.label, "model"))
    warm_started_from = _warm_start_chain(graph, trainer_execution, edges)
    custom = custom_config(trainer)
    trainer_config = parsed_json(custom.get(metadata_keys.TRAINER_CONFIG_KEY, {}))
    transform_graph = transform = None
    graphs = graph.inputs(trainer_execution.id, "transform_graph")
    if graphs:
        transform_graph = graph.record(graphs[0])
        edges.append(Edge(transform_graph.label, trainer.label, "transform_graph"))
        producer = graph.producer(graphs[0].id, "transform_graph")
        if producer is not None:
            transform = graph.execution(producer)
            edges.append(Edge(transform.label, transform_graph.label, "transform_graph"))
    examples = graph.inputs(trainer_execution.id, "examples")
    if not examples:
        raise LineageError(f"model {model.id}: its Trainer recorded no examples")
    dataset = read_dataset(graph, examples[0], edges)
    edges.append(Edge(dataset.examples.label, trainer.label, "examples"))
    if transform is not None:
        for used in graph.inputs(transform.id, "examples"):
            edges.append(Edge(graph.record(used).label, transform.label, "examples"))
    return ModelLineage(
        pushed_model=pushed_model,
        pusher=pusher,
        model=model_record,
        trainer=trainer,
        trainer_config=trainer_config if isinstance(trainer_config, dict) else {},
        code_fingerprint=custom.get(metadata_keys.CODE_FINGERPRINT_KEY),
        evaluation=evaluation,
        transform_graph=transform_graph,
        transform=transform,
        dataset=dataset,
        edges=tuple(dict.fromkeys(edges)),
        warm_started_from=warm_started_from,
    )


def _warm_start_chain(
    graph: MetadataGraph, trainer_execution: mlmd_pb2.Execution, edges: list[Edge]
) -> tuple[ArtifactRecord, ...]:
    """Follows the Trainers' base_model inputs back to a model trained from scratch."""
    chain: list[ArtifactRecord] = []
    execution = trainer_execution
    while execution is not None:
        bases = graph.inputs(execution.id, "base_model")
        if not bases or any(record.id == bases[0].id for record in chain):
            break
        record = graph.record(bases[0])
        edges.append(Edge(record.label, graph.execution(execution).label, "base_model"))
        chain.append(record)
        execution = graph.producer(bases[0].id, "model")
    return tuple(chain)


def models_trained_on(graph: MetadataGraph, examples_id: int) -> tuple[TrainedModel, ...]:
    by_model: dict[int, list[mlmd_pb2.Execution]] = {}
    for execution in graph.consumers(examples_id, "examples"):
        for model in graph.outputs(execution.id, "model"):
            by_model.setdefault(model.id, []).append(execution)
    trained = []
    for model_id, trainers in sorted(by_model.items()):
        model = graph.artifact(model_id)
        made = [e for e in trainers if e.last_known_state != mlmd_pb2.Execution.CACHED]
        verdicts, pushed = [], []
        for consumer in graph.consumers(model_id, "model"):
            for blessing in graph.outputs(consumer.id, "blessing"):
                if metadata_keys.BLESSED_PROPERTY in blessing.custom_properties:
                    verdicts.append(
                        bool(blessing.custom_properties[metadata_keys.BLESSED_PROPERTY].int_value)
                    )
            for artifact in graph.outputs(consumer.id, "pushed_model"):
                if _was_pushed(artifact):
                    pushed.append(
                        artifact.custom_properties[
                            metadata_keys.PUSHED_DESTINATION_PROPERTY
                        ].string_value
                    )
        trained.append(
            TrainedModel(
                model=graph.record(model),
                trainer=graph.execution((made or trainers)[0]),
                runs=tuple(sorted({run for t in trainers for run in graph.execution(t).runs})),
                blessed=any(verdicts) if verdicts else None,
                pushed_to=tuple(sorted(set(pushed))),
            )
        )
    return tuple(trained)


def examples_lineage(store: metadata_store.MetadataStore, examples_id: int) -> ExamplesLineage:
    """Downstream of a dataset: the models trained on it, blessed or not, pushed or not."""
    graph = MetadataGraph(store)
    examples = graph.artifact(examples_id, ("Examples",))
    return ExamplesLineage(
        read_dataset(graph, examples, None), models_trained_on(graph, examples_id)
    )


# What a model was trained on (for the data gate and the baselines).


def producer_of(
    store: metadata_store.MetadataStore, artifact_id: int, key: str
) -> mlmd_pb2.Execution | None:
    """The execution that output the artifact under this key, if any."""
    return MetadataGraph(store).producer(artifact_id, key)


def training_examples_id(store: metadata_store.MetadataStore, model_id: int) -> int | None:
    """The Examples artifact a model's Trainer read."""
    graph = MetadataGraph(store)
    trainer = graph.producer(model_id, "model")
    examples = graph.inputs(trainer.id, "examples") if trainer is not None else []
    return examples[0].id if examples else None


def ingest_report_artifact(
    store: metadata_store.MetadataStore, examples_id: int
) -> mlmd_pb2.Artifact | None:
    """The IngestReport ImageExampleGen wrote beside an Examples artifact, if any."""
    graph = MetadataGraph(store)
    producer = graph.producer(examples_id, "examples")
    reports = graph.outputs(producer.id, metadata_keys.INGEST_REPORT_OUTPUT_KEY) if producer else []
    return reports[0] if reports else None


def _ingest_report(
    store: metadata_store.MetadataStore, examples_id: int
) -> IngestReportRecord | None:
    report = ingest_report_artifact(store, examples_id)
    return IngestReportRecord.read(report) if report is not None else None


def examples_label_map(store: metadata_store.MetadataStore, examples_id: int) -> dict[str, int]:
    """The label map ImageExampleGen recorded beside an Examples artifact ({} if none)."""
    report = _ingest_report(store, examples_id)
    return report.label_map if report else {}


def examples_source_index(store: metadata_store.MetadataStore, examples_id: int) -> str:
    """The source index ImageExampleGen wrote beside an Examples artifact ("" if none)."""
    report = _ingest_report(store, examples_id)
    return report.source_index_path if report else ""


def model_label_map(store: metadata_store.MetadataStore, model_id: int) -> dict[str, int]:
    """The label map of the data a model was trained on: what its outputs mean."""
    examples_id = training_examples_id(store, model_id)
    return {} if examples_id is None else examples_label_map(store, examples_id)


def examples_statistics_id(store: metadata_store.MetadataStore, examples_id: int) -> int | None:
    """The live ExampleStatistics computed from an Examples artifact, the newest if several."""
    graph = MetadataGraph(store)
    found = [
        artifact.id
        for execution in graph.consumers(examples_id, "examples")
        for artifact in graph.outputs(execution.id, "statistics")
        if graph.artifact_types[artifact.type_id] == "ExampleStatistics"
        and artifact.state == mlmd_pb2.Artifact.LIVE
    ]
    return max(found, default=None)
