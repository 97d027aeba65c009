"""The Vertex AI / Kubeflow V2 PipelineJob spec TFX compiles: every component, in our image, with
its settings and the pipeline root. Needs kfp-pipeline-spec (the orchestrators environment,
`make airflow-test`); skipped without it."""

import dataclasses
import json

import pytest

from pipeline.config.pipeline_config import local_preset
from tests.data_prep import image_files
from tests.pipeline.expected import COMPONENTS

pytestmark = pytest.mark.slow
IMAGE = "europe-docker.pkg.dev/project/imgpipe/imgpipe:1.0"
ROOT = "gs://bucket/imgpipe"
RESOLVER = "baseline_model_resolver"
DRIFT_BASELINE = f"{ROOT}/StatisticsGen/statistics/7"  # the blessed model's training data's


@pytest.fixture(scope="module")
def compiled(tmp_path_factory):
    pytest.importorskip("kfp.pipeline_spec")
    from pipeline.runners.vertex import compile_vertex, snapshot_for_vertex

    root = tmp_path_factory.mktemp("vertex")
    for index, label in enumerate(("cat", "dog")):
        path = root / "images" / label / "0.jpg"
        path.parent.mkdir(parents=True)
        path.write_bytes(image_files.jpeg(seed=index))
    config = dataclasses.replace(
        local_preset(str(root / "images"), str(root / "build")),
        pipeline_root=ROOT,
        beam_args=("--runner=DataflowRunner", "--region=europe-west4"),
    )
    data = snapshot_for_vertex(config.ingest.input, span=4)
    output = root / "out" / "imgpipe.json"
    spec = compile_vertex(config, data, IMAGE, str(output), drift_baseline=DRIFT_BASELINE)
    assert json.loads(output.read_text()) == spec
    return spec, data


def _parameters(spec, task):
    values = spec["pipelineSpec"]["root"]["dag"]["tasks"][task]["inputs"]["parameters"]
    return {
        key: next(iter(value["runtimeValue"]["constantValue"].values()))
        for key, value in values.items()
    }


@pytest.mark.orchestrators
def test_every_component_is_a_task_and_the_baseline_is_resolved_from_metadata(compiled):
    spec, _ = compiled
    tasks = spec["pipelineSpec"]["root"]["dag"]["tasks"]
    assert {name for name in tasks if not name.startswith(RESOLVER)} == set(COMPONENTS) - {RESOLVER}
    assert {name for name in tasks if name.startswith(RESOLVER)} == {
        f"{RESOLVER}-model-resolver",
        f"{RESOLVER}-model-blessing-resolver",
    }
    baseline = tasks["Evaluator"]["inputs"]["artifacts"]["baseline_model"]
    assert baseline["taskOutputArtifact"]["producerTask"] == f"{RESOLVER}-model-resolver"
    assert "Trainer" in tasks["Evaluator"]["dependentTasks"]
    assert "DataGate" in tasks["Transform"]["dependentTasks"]


@pytest.mark.orchestrators
def test_components_run_in_our_image_with_the_beam_options(compiled):
    spec, _ = compiled
    executors = spec["pipelineSpec"]["deploymentSpec"]["executors"]
    containers = {
        name.removesuffix("_executor"): executor["container"]
        for name, executor in executors.items()
        if "container" in executor
    }
    # The drift baseline is an importer, which runs in Vertex's own system container.
    assert set(containers) == set(COMPONENTS) - {RESOLVER, "drift_baseline_resolver"}
    for name, container in containers.items():
        assert container["image"] == IMAGE, name
        assert container["command"][-1] == (
            "tfx.orchestration.kubeflow.v2.container.kubeflow_v2_run_executor"
        )
    for beam_component in ("ImageExampleGen", "StatisticsGen", "Transform", "Evaluator"):
        assert containers[beam_component]["args"][-2:] == [
            "--runner=DataflowRunner",
            "--region=europe-west4",
        ]


@pytest.mark.orchestrators
def test_settings_user_code_and_pipeline_root(compiled):
    spec, data = compiled
    assert spec["runtimeConfig"]["gcsOutputDirectory"] == ROOT
    assert spec["pipelineSpec"]["pipelineInfo"]["name"] == "imgpipe"
    ingest = _parameters(spec, "ImageExampleGen")
    assert (int(ingest["span"]), ingest["input_fingerprint"]) == (4, data.fingerprint)
    # The code is imported from the image by name: no module file, no wheel under the root.
    transform, trainer = _parameters(spec, "Transform"), _parameters(spec, "Trainer")
    assert transform["preprocessing_fn"] == "components.training.transform.preprocessing_fn"
    assert trainer["run_fn"] == "components.training.trainer.run_fn"
    assert "module_file" not in transform and "module_file" not in trainer
    assert "_wheels" not in json.dumps(spec)
    assert "metadata.db" not in json.dumps(spec)  # Vertex keeps its own ML Metadata


@pytest.mark.orchestrators
def test_the_drift_check_compares_the_span_with_the_given_baseline(compiled):
    spec, _ = compiled
    tasks = spec["pipelineSpec"]["root"]["dag"]["tasks"]
    check = tasks["DistributionValidator"]["inputs"]
    baseline = check["artifacts"]["baseline_statistics"]["taskOutputArtifact"]
    assert baseline["producerTask"] == "drift_baseline_resolver"
    statistics = check["artifacts"]["statistics"]["taskOutputArtifact"]
    assert statistics["producerTask"] == "StatisticsGen"
    assert "DistributionValidator" in tasks["DataGate"]["dependentTasks"]
    assert DRIFT_BASELINE in json.dumps(tasks["drift_baseline_resolver"])
    parameters = _parameters(spec, "DistributionValidator")
    assert parameters["include_split_pairs"] == '[["train", "train"]]'
    # The comparators and thresholds are the config's, as in local runs.
    config = json.loads(parameters["distribution_validator_config"])["defaultSliceConfig"]
    thresholds = {
        comparator["path"]["step"][0]: comparator["distributionComparator"]
        for comparator in config["feature"]
    }
    assert thresholds["label_name"] == {"infinityNorm": {"threshold": 0.2}}
    # Image sizes are measured by the gate itself, as the share of images moved.
    assert "height" not in thresholds
    gate = tasks["DataGate"]["inputs"]
    assert gate["artifacts"]["baseline_statistics"]["taskOutputArtifact"]["producerTask"] == (
        "drift_baseline_resolver"
    )
    assert float(_parameters(spec, "DataGate")["image_size_share"]) == 0.2


def test_a_later_span_needs_its_drift_baseline(tmp_path):
    from pipeline.runners.vertex import compile_vertex, snapshot_for_vertex

    images = tmp_path / "images" / "cat"
    images.mkdir(parents=True)
    (images / "0.jpg").write_bytes(image_files.jpeg(seed=3))
    config = local_preset(str(tmp_path / "images"), str(tmp_path / "build"))
    data = snapshot_for_vertex(config.ingest.input, span=2)
    with pytest.raises(ValueError, match="drift-baseline: is needed for span 2"):
        compile_vertex(config, data, IMAGE, str(tmp_path / "x.json"))
    assert not (tmp_path / "x.json").exists()


def test_span_must_be_positive():
    from pipeline.runners.vertex import snapshot_for_vertex

    with pytest.raises(ValueError, match="span 0 must be 1 or more"):
        snapshot_for_vertex("unused", span=0)


def test_cli_bad_span_fails_before_any_work(tmp_path, capsys):
    from pipeline.cli import main

    args = ["--pipeline-root", ROOT, "--image", IMAGE, "--output", str(tmp_path / "x.json")]
    assert main(["compile-vertex", "--data", str(tmp_path), *args, "--span", "0"]) == 2
    assert "span 0 must be 1 or more" in capsys.readouterr().err
    assert not (tmp_path / "x.json").exists()


@pytest.mark.orchestrators
def test_cli_writes_the_spec_with_beam_options_after_dashes(compiled, tmp_path, capsys):
    from pipeline.cli import main

    images = tmp_path / "images" / "cat"
    images.mkdir(parents=True)
    (images / "0.jpg").write_bytes(image_files.jpeg(seed=3))
    output = tmp_path / "spec.json"
    code = main(
        ["compile-vertex", "--data", str(tmp_path / "images"), "--pipeline-root", ROOT]
        + ["--image", IMAGE, "--span", "2", "--output", str(output)]
        + ["--drift-baseline", DRIFT_BASELINE, "--", "--runner=FlinkRunner"]
    )
    assert code == 0
    # Span 2 with its drift baseline: every component but the resolver, which compiles to two
    # resolver tasks.
    tasks = len(COMPONENTS) - 1 + 2
    assert f"{output}: {tasks} tasks in {IMAGE}" in capsys.readouterr().out
    spec = json.loads(output.read_text())
    executor = spec["pipelineSpec"]["deploymentSpec"]["executors"]["Transform_executor"]
    assert executor["container"]["args"][-1] == "--runner=FlinkRunner"
    assert f"{ROOT}-serving/imgpipe" in json.dumps(
        spec["pipelineSpec"]["root"]["dag"]["tasks"]["Pusher"]
    )
