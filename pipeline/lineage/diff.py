"""What changed between two runs: each run's settings, code, data, metrics and outcome,
flattened to section.key -> value and compared."""

from __future__ import annotations

import dataclasses
import json

from ml_metadata.metadata_store import metadata_store

from components import metadata_keys
from pipeline.lineage.metrics import eval_accuracy
from pipeline.lineage.models import read_dataset
from pipeline.lineage.runs import PipelineRun, find_run, list_runs
from pipeline.lineage.store import PIPELINE_RUN_CONTEXT, MetadataGraph, custom_config, parsed_json


@dataclasses.dataclass(frozen=True)
class Change:
    section: str  # config, code, data, metrics, outcome, artifacts, components
    key: str
    a: object
    b: object


@dataclasses.dataclass(frozen=True)
class RunDiff:
    run_a: str
    run_b: str
    changes: tuple[Change, ...]
    unchanged: int
    name_a: str | None = None  # each run's name or note (imgpipe run --run-name)
    name_b: str | None = None


_SECTIONS = ("config", "code", "data", "metrics", "outcome", "artifacts", "components")


def _flatten(prefix: str, value, into: dict) -> None:
    if isinstance(value, dict):
        for key, inner in value.items():
            _flatten(f"{prefix}.{key}", inner, into)
    elif isinstance(value, list) and any(isinstance(item, (dict, list)) for item in value):
        for index, inner in enumerate(value):
            _flatten(f"{prefix}[{index}]", inner, into)
    else:
        into[prefix] = value


def run_facts(store: metadata_store.MetadataStore, run: PipelineRun) -> dict[str, object]:
    """What a run was made of, flattened to section.key -> value, for comparing runs."""
    graph = MetadataGraph(store)
    facts: dict[str, object] = {}
    for component in run.components:
        facts[f"components.{component.node}"] = component.state
        execution = graph.store.get_executions_by_id([component.execution_id])[0]
        record = graph.execution(execution)
        properties = record.properties
        custom = custom_config(record)
        # Each component's own code (pipeline/code_fingerprint.py): an exec property of ours,
        # or in custom_config of TFX's components that run our module code.
        code = properties.get(metadata_keys.CODE_FINGERPRINT_KEY) or custom.get(
            metadata_keys.CODE_FINGERPRINT_KEY
        )
        if code:
            facts[f"code.{component.node}"] = code
        if graph.outputs(execution.id, "examples"):
            _flatten(
                "config.ingest", properties.get(metadata_keys.INGEST_CONFIG_PARAMETER, {}), facts
            )
            dataset = read_dataset(graph, graph.outputs(execution.id, "examples")[0], None)
            facts["data.input"] = dataset.input
            facts["data.input_fingerprint"] = dataset.input_fingerprint
            _flatten("data.files", dataset.totals, facts)
            _flatten("data.split", dataset.split_counts, facts)
            facts["data.classes"] = ", ".join(sorted(dataset.label_map))
            facts["data.span"] = dataset.span
            facts["artifacts.examples"] = dataset.examples.id
        if graph.outputs(execution.id, "transform_graph"):
            config = {k: v for k, v in custom.items() if k != metadata_keys.CODE_FINGERPRINT_KEY}
            _flatten("config.transform", config, facts)
            facts["code.transform_module"] = properties.get("module_path")
            facts["artifacts.transform_graph"] = graph.outputs(execution.id, "transform_graph")[
                0
            ].id
        models = graph.outputs(execution.id, "model")
        if models:
            _flatten(
                "config.trainer",
                parsed_json(custom.get(metadata_keys.TRAINER_CONFIG_KEY, {})),
                facts,
            )
            facts["code.trainer_module"] = properties.get("module_path")
            facts["artifacts.model"] = models[0].id
        if "eval_config" in properties:  # a failed Evaluator has its config but no outputs
            _flatten("config.eval", properties["eval_config"], facts)
        evaluations = graph.outputs(execution.id, "evaluation")
        if evaluations:
            facts["metrics.eval_accuracy"] = eval_accuracy(evaluations[0].uri)
    context = store.get_context_by_type_and_name(PIPELINE_RUN_CONTEXT, run.run_id)
    config_file = context and context.custom_properties.get(metadata_keys.RUN_CONFIG_FILE)
    if config_file:  # the settings the run's config file gave, as JSON
        _flatten("config.file", json.loads(config_file.string_value), facts)
    overrides = context and context.custom_properties.get(metadata_keys.RUN_SET)
    for setting in json.loads(overrides.string_value) if overrides else ():
        field, _, value = setting.partition("=")
        facts[f"config.set.{field.strip()}"] = value.strip()
    facts["metrics.test_accuracy"] = run.test_accuracy
    for key, value in (run.training_outcome or {}).items():
        facts[f"outcome.training.{key}"] = value
    facts["outcome.blessed"] = run.blessed
    facts["outcome.pushed_to"] = run.pushed_to
    facts["outcome.not_pushed_reason"] = run.not_pushed_reason
    return facts


def _absent_component(key: str, a: dict, b: dict) -> bool:
    """A component's code is compared only where both runs have it (CuratedSchemaGen runs on a
    pipeline's first span only): its absence is a `components` change, not a code change."""
    return key.startswith("code.") and None in (a.get(key), b.get(key))


def diff_runs(
    store: metadata_store.MetadataStore, run_a: str, run_b: str, pipeline: str | None = None
) -> RunDiff:
    runs = list_runs(store, pipeline, metrics=False)
    first, second = find_run(runs, run_a), find_run(runs, run_b)
    a, b = run_facts(store, first), run_facts(store, second)
    changes = [
        Change(key.split(".", 1)[0], key.split(".", 1)[1], a.get(key), b.get(key))
        for key in set(a) | set(b)
        if a.get(key) != b.get(key) and not _absent_component(key, a, b)
    ]
    changes.sort(key=lambda c: (_SECTIONS.index(c.section), c.key))
    unchanged = len(set(a) | set(b)) - len(changes)
    return RunDiff(first.run_id, second.run_id, tuple(changes), unchanged, first.name, second.name)
