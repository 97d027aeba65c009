import dataclasses
import json

import pytest
import tensorflow_data_validation as tfdv
from tfx.components.util import udf_utils

from components.evaluation import evaluator as evaluator_module
from components.training import trainer as trainer_module
from components.training import transform as transform_module
from components.training.trainer_config import TuningConfig
from data_prep.contract import features
from pipeline.config.beam_options import resolve_beam_args
from pipeline.config.pipeline_config import local_preset
from pipeline.factory import WARM_START_NODE, create_pipeline, statistics_options
from pipeline.mlmd_connection import MlmdTarget
from pipeline.validation.data_snapshot import DataSnapshot
from tests.components.training.conftest import write_shard
from tests.pipeline.expected import COMPONENTS, SCHEMA_IMPORTER

STORE = MlmdTarget(mysql="127.0.0.1:3306/mlmd").connection_config(read_only=False)


def code_of(module: str) -> str:
    """A stand-in code fingerprint that names the module it fingerprints."""
    return f"code of {module}"


def _create(tmp_path, files=2):
    config = local_preset(str(tmp_path / "images"), str(tmp_path / "build"))
    data = DataSnapshot("abc", 1, files=files)
    return config, create_pipeline(config, data, code_of, STORE)


def test_factory_is_pure_and_wires_every_component(tmp_path):
    config, pipeline = _create(tmp_path)
    assert sorted(c.id for c in pipeline.components) == sorted(COMPONENTS)
    assert pipeline.metadata_connection_config == STORE  # the runner's choice of store
    assert [p for p in tmp_path.rglob("*") if p.is_file()] == []  # nothing written
    assert pipeline.beam_pipeline_args == list(resolve_beam_args(config.beam_args, 2))


def test_no_setting_takes_a_name_airflows_launcher_keeps_for_itself(tmp_path):
    """TFX's legacy launcher (Airflow's) refuses, before it records the execution, a component
    whose settings use one of the names it puts on every execution."""
    from tfx.orchestration.metadata import _EXECUTION_TYPE_RESERVED_KEYS  # noqa: PLC2701

    _, pipeline = _create(tmp_path)
    for component in pipeline.components:
        assert not set(component.exec_properties) & set(_EXECUTION_TYPE_RESERVED_KEYS), component.id


def test_user_code_is_imported_by_name_and_its_edits_change_the_settings(tmp_path):
    """No module_file: TFX builds and installs no user-code wheel; the fingerprint of each
    module's code in its custom_config is what invalidates the cache when the code changes."""
    _, pipeline = _create(tmp_path)
    nodes = {c.id: c for c in pipeline.components}
    transform, trainer = nodes["Transform"].exec_properties, nodes["Trainer"].exec_properties
    assert transform["module_file"] is None and trainer["module_file"] is None
    assert udf_utils.get_fn(transform, "preprocessing_fn") is transform_module.preprocessing_fn
    assert udf_utils.get_fn(trainer, "run_fn") is trainer_module.run_fn
    for properties, module in ((transform, transform_module), (trainer, trainer_module)):
        custom_config = json.loads(properties["custom_config"])
        assert custom_config["code_fingerprint"] == code_of(module.__name__)


def test_the_evaluator_runs_its_module_by_name_and_its_edits_change_the_settings(tmp_path):
    """TFMA loads the models through evaluator_module; its code fingerprint is an exec property
    of the Evaluator, which has no custom_config, so an edit re-runs the evaluation."""
    _, pipeline = _create(tmp_path)
    evaluator = {c.id: c for c in pipeline.components}["Evaluator"].exec_properties
    assert evaluator["module_file"] is None
    found = udf_utils.get_fn(evaluator, "custom_eval_shared_model")
    assert found is evaluator_module.custom_eval_shared_model
    assert evaluator["code_fingerprint"] == code_of(evaluator_module.__name__)


def test_beam_jobs_get_options_by_input_size(tmp_path):
    _, small = _create(tmp_path, files=10)
    _, large = _create(tmp_path, files=10**6)
    assert "--direct_running_mode=in_memory" in small.beam_pipeline_args
    assert "--direct_running_mode=multi_processing" in large.beam_pipeline_args


def test_a_later_span_imports_the_decided_schema_and_keeps_the_label_ids(tmp_path):
    config = local_preset(str(tmp_path / "images"), str(tmp_path / "build"))
    reference = {"dog": 0, "cat": 1}
    data = DataSnapshot("abc", 2, reference_label_map=reference, schema_uri="/s/Schema/3")
    nodes = {c.id: c for c in create_pipeline(config, data, code_of, STORE).components}
    assert set(nodes) == set(COMPONENTS) - {"CuratedSchemaGen"} | {SCHEMA_IMPORTER}
    assert nodes[SCHEMA_IMPORTER].exec_properties["artifact_uri"] == "/s/Schema/3"
    for node in ("ImageExampleGen", "DataGate"):
        assert json.loads(nodes[node].exec_properties["reference_label_map"]) == reference
    assert "DataGate" in {n.id for n in nodes["Transform"].upstream_nodes}


def test_warm_start_and_tuning_add_their_nodes_and_feed_the_trainer(tmp_path):
    config = local_preset(str(tmp_path / "images"), str(tmp_path / "build"))
    config = dataclasses.replace(
        config,
        trainer=dataclasses.replace(config.trainer, warm_start=True),
        tuning=TuningConfig(enabled=True),
    )
    pipeline = create_pipeline(config, DataSnapshot("abc", 1), code_of, STORE)
    by_id = {component.id: component for component in pipeline.components}
    assert sorted(by_id) == sorted([*COMPONENTS, "Tuner", WARM_START_NODE])
    trainer_inputs = by_id["Trainer"].inputs
    assert trainer_inputs["base_model"].producer_component_id == WARM_START_NODE
    assert trainer_inputs["hyperparameters"].producer_component_id == "Tuner"


@pytest.mark.slow
def test_statistics_from_sketches_equal_the_exact_ones_but_for_the_image_bytes(tmp_path):
    """StatisticsGen's options (TFDV's sketches for top values and unique counts) against TFDV's
    exact defaults, on one shard: what the schema, ExampleValidator and the drift check read."""
    shard = str(tmp_path / "shard.gz")
    write_shard(shard, start=0, count=30)
    _, pipeline = _create(tmp_path)
    [statistics_gen] = [c for c in pipeline.components if c.id == "StatisticsGen"]
    options = statistics_gen.exec_properties["stats_options_json"]
    assert tfdv.StatsOptions.from_json(options).use_sketch_based_topk_uniques

    def by_name(stats_options) -> dict:
        found = tfdv.generate_statistics_from_tfrecord(shard, stats_options=stats_options)
        return {f.path.step[0]: f for f in found.datasets[0].features}

    exact, sketched = by_name(tfdv.StatsOptions()), by_name(statistics_options())
    assert sorted(exact) == sorted(sketched) == sorted(features.FEATURE_NAMES)
    for name in set(exact) - {features.IMAGE}:
        assert sketched[name] == exact[name], name
    image_exact, image_sketched = exact[features.IMAGE], sketched[features.IMAGE]
    assert image_sketched.string_stats.unique == image_exact.string_stats.unique == 30
    assert image_sketched.string_stats.common_stats == image_exact.string_stats.common_stats


def test_the_pusher_runs_the_verified_push_and_carries_its_codes_fingerprint(tmp_path):
    from components.serving import pusher

    _, pipeline = _create(tmp_path)
    node = {c.id: c for c in pipeline.components}["Pusher"]
    assert node.executor_spec.executor_class is pusher.Executor
    custom_config = json.loads(node.exec_properties["custom_config"])
    assert custom_config["code_fingerprint"] == code_of(pusher.__name__)


def test_the_push_is_the_last_write_and_carries_the_card_tflite_and_evaluation(tmp_path):
    """Nothing writes into a pushed version after its rename: the Pusher takes the model card's
    folder (card, TFLite models, evaluation) as an input, and no node takes the Pusher's
    output, so no later step can write beside the model it pushed."""
    from components.metadata_keys import MODEL_CARD_OUTPUT_KEY

    _, pipeline = _create(tmp_path)
    nodes = {c.id: c for c in pipeline.components}
    card = nodes["ModelCardGen"].outputs[MODEL_CARD_OUTPUT_KEY]
    assert nodes["Pusher"].inputs[MODEL_CARD_OUTPUT_KEY] is card
    tflite = nodes["TFLiteExport"].outputs["tflite"]
    assert nodes["ModelCardGen"].inputs["tflite"] is tflite
    pushed = nodes["Pusher"].outputs["pushed_model"]
    assert [c.id for c in pipeline.components if pushed in c.inputs.values()] == []
    assert pipeline.components[-1].id == "Pusher"
