"""The tiny pipeline on the local Beam cluster (`imgpipe run --runner local-cluster`), training
on two local worker processes (trainer.workers=2), in a child process: an SDK worker killed
while the ingest decodes fails the run with one error line and publishes nothing; the re-run
completes on a job service, SDK workers and training workers that are processes of their own,
and its examples, statistics and transform graph equal the DirectRunner's (the first run of the
shared two-run store, same images and settings), and its Evaluator's metrics its two-worker
model's own."""

import dataclasses
import glob
import json
import os
import pathlib
import shutil
import signal
import subprocess
import sys
import threading
import time

import numpy as np
import pytest
import tensorflow as tf
import tensorflow_transform as tft
from tensorflow_metadata.proto.v0 import statistics_pb2

from components.evaluation.evaluation_report import read_scores
from components.training.trainer import METRICS_FILE
from components.training.transform import normalization_from_transform
from pipeline import exit_codes
from pipeline.lineage import list_runs
from pipeline.runners.local import open_store
from tests.data_prep import image_files
from tests.pipeline.tiny_pipeline import FIRST_RATE, LABELS, tiny_config

pytestmark = pytest.mark.slow
RUN_TIMEOUT_S = 1500
JOB_SERVICE, WORKER_POOL = "cluster_services job-service", "cluster_services worker-pool"
SDK_WORKER = "SdkHarness"
TRAINING_WORKER = "components.training.local_workers"
TRAINING_WORKERS = 2
# The killed run ingests this many more images, so that its ingest job still has seconds of
# decoding ahead when the watch sees its first decoder and kills the SDK worker.
EXTRA_IMAGES_TO_KILL_IN = 1500


def _descendants(pid: int) -> dict[int, tuple[int, str]]:
    """Every live process under `pid`: its parent and command line."""
    found, todo = {}, [pid]
    while todo:
        parent = todo.pop()
        for tasks in glob.glob(f"/proc/{parent}/task/*/children"):
            try:
                with open(tasks) as handle:
                    children = [int(child) for child in handle.read().split()]
            except OSError:
                continue
            for child in children:
                try:
                    with open(f"/proc/{child}/cmdline", "rb") as handle:
                        found[child] = (parent, handle.read().replace(b"\0", b" ").decode())
                except OSError:
                    continue
                todo.append(child)
    return found


class ProcessWatch:
    """Samples the run's processes by role while it runs; when asked, kills the first SDK worker
    seen decoding (it has forked its supervised decoder: the ingest job is under way)."""

    def __init__(self, process: subprocess.Popen, kill_a_decoding_worker: bool = False):
        self.seen: dict[str, set[int]] = {
            role: set() for role in (JOB_SERVICE, WORKER_POOL, SDK_WORKER, TRAINING_WORKER)
        }
        self.killed: int | None = None
        self._process, self._kill = process, kill_a_decoding_worker
        self._thread = threading.Thread(target=self._watch, daemon=True)
        self._thread.start()

    def _watch(self) -> None:
        while self._process.poll() is None:
            processes = _descendants(self._process.pid)
            for pid, (parent, command) in processes.items():  # a parent comes before its children
                for role, pids in self.seen.items():
                    # A process forked by one of a role's (a decoder, or a helper not yet
                    # exec'd) shows its parent's command line: it is not one of the role's.
                    if parent in pids or role not in command:
                        continue
                    if role != SDK_WORKER or parent in self.seen[WORKER_POOL]:
                        pids.add(pid)
            if self._kill and self.killed is None:
                parents = {parent for parent, _ in processes.values()}
                decoding = sorted(self.seen[SDK_WORKER] & processes.keys() & parents)
                if decoding:
                    self.killed = decoding[0]
                    os.kill(self.killed, signal.SIGKILL)
            time.sleep(0.1)


def _imgpipe_run(images, build, kill_a_decoding_worker=False):
    command = [
        sys.executable,
        "-m",
        "pipeline.cli",
        "run",
        "--runner",
        "local-cluster",
        "--preset",
        "runlocal",
        "--data",
        str(images),
        "--build-dir",
        str(build),
        "--set",
        f"trainer.learning_rate={FIRST_RATE}",
        "--set",
        f"trainer.workers={TRAINING_WORKERS}",
    ]
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    watch = ProcessWatch(process, kill_a_decoding_worker)
    out, err = process.communicate(timeout=RUN_TIMEOUT_S)
    return process.returncode, out, err, watch


@dataclasses.dataclass
class ClusterRuns:
    killed: tuple  # (exit code, stdout, stderr, ProcessWatch)
    rerun: tuple
    config: object


@pytest.fixture(scope="module")
def cluster_runs(two_runs, tmp_path_factory) -> ClusterRuns:
    root = tmp_path_factory.mktemp("local_cluster")
    build, more_images = root / "build", root / "more_images"
    shutil.copytree(two_runs.images, more_images)
    for i in range(EXTRA_IMAGES_TO_KILL_IN):
        (more_images / LABELS[i % len(LABELS)] / f"extra{i}.png").write_bytes(
            image_files.png(seed=10_000 + i)
        )
    killed = _imgpipe_run(more_images, build, kill_a_decoding_worker=True)
    rerun = _imgpipe_run(two_runs.images, build)
    return ClusterRuns(killed, rerun, tiny_config(two_runs.images, build))


def test_a_killed_worker_fails_the_run_with_one_line_and_publishes_nothing(cluster_runs):
    code, out, err, watch = cluster_runs.killed
    assert watch.killed is not None
    assert code != exit_codes.OK
    assert "Traceback" not in out + err
    [line] = err.strip().splitlines()
    assert line.startswith("imgpipe run: error: ")
    assert "SDK worker" in line and "local Beam cluster" in line
    store = open_store(cluster_runs.config.metadata_path)
    killed_run = list_runs(store, cluster_runs.config.name)[-1]  # newest first: the first
    assert killed_run.status == "failed"
    [failed] = [c for c in killed_run.components if c.state == "failed"]
    events = store.get_events_by_execution_ids([failed.execution_id])
    assert not [e for e in events if e.type == e.OUTPUT]


def test_the_rerun_completes_on_separate_processes(cluster_runs):
    code, out, err, watch = cluster_runs.rerun
    assert code == exit_codes.OK, err
    assert "Traceback" not in out + err and "error" not in out.lower()
    assert "Beam local cluster: job service" in out
    [job_service], [pool] = watch.seen[JOB_SERVICE], watch.seen[WORKER_POOL]
    workers = watch.seen[SDK_WORKER]
    assert workers
    assert len({job_service, pool, *workers}) == 2 + len(workers)
    # The SDK workers are the pool's children, not the run's nor the job service's.
    assert all(worker not in (job_service, pool) for worker in workers)
    # The Trainer ran on its own worker processes, and showed their progress.
    trainers = watch.seen[TRAINING_WORKER]
    assert len(trainers) == TRAINING_WORKERS
    assert not trainers & {job_service, pool, *workers}
    assert "Trainer: epoch" in out
    # Every service and worker stopped with the run.
    assert not _descendants(os.getpid()).keys() & {job_service, pool, *workers, *trainers}


def _run(config, run_id: str | None = None):
    """The run `run_id` of config's store; its newest complete run when None."""
    runs = list_runs(open_store(config.metadata_path), config.name)
    return next(
        r for r in runs if r.run_id == run_id or (run_id is None and r.status == "complete")
    )


def _output_uri(config, run, node: str, key: str) -> str:
    store = open_store(config.metadata_path)
    [component] = [c for c in run.components if c.node == node]
    events = store.get_events_by_execution_ids([component.execution_id])
    [artifact] = store.get_artifacts_by_id(
        [e.artifact_id for e in events if e.type == e.OUTPUT and e.path.steps[0].key == key]
    )
    return artifact.uri


def _examples(uri: str) -> dict[str, list[bytes]]:
    splits = {}
    for split_dir in sorted(glob.glob(os.path.join(uri, "Split-*"))):
        records = []
        for path in sorted(glob.glob(os.path.join(split_dir, "*.gz"))):
            records += [r.numpy() for r in tf.data.TFRecordDataset(path, "GZIP")]
        splits[os.path.basename(split_dir)] = sorted(records)
    return splits


def _statistics(uri: str) -> dict[str, float]:
    """Per split: examples, and per feature its non-missing count and numeric mean and std,
    flat ('Split-train/height/mean')."""
    found = {}
    for path in sorted(glob.glob(os.path.join(uri, "Split-*", "FeatureStats.pb"))):
        split = path.split(os.sep)[-2]
        stats = statistics_pb2.DatasetFeatureStatisticsList()
        with open(path, "rb") as handle:
            stats.ParseFromString(handle.read())
        [dataset] = stats.datasets
        found[f"{split}/examples"] = dataset.num_examples
        for feature in dataset.features:
            name, which = f"{split}/{feature.path.step[-1]}", feature.WhichOneof("stats")
            found[f"{name}/non_missing"] = getattr(feature, which).common_stats.num_non_missing
            if which == "num_stats":
                found[f"{name}/mean"] = feature.num_stats.mean
                found[f"{name}/std"] = feature.num_stats.std_dev
    return found


def test_outputs_equal_the_direct_runners(cluster_runs, two_runs):
    assert cluster_runs.rerun[0] == exit_codes.OK
    runs = {
        "cluster": (cluster_runs.config, _run(cluster_runs.config)),
        "direct": (two_runs.config, _run(two_runs.config, two_runs.first.run_id)),
    }

    def outputs(node, key, read):
        return [read(_output_uri(config, run, node, key)) for config, run in runs.values()]

    on_cluster, direct = outputs("ImageExampleGen", "examples", _examples)
    assert on_cluster and on_cluster == direct
    on_cluster, direct = outputs("StatisticsGen", "statistics", _statistics)
    assert on_cluster and on_cluster == pytest.approx(direct)
    on_cluster, direct = outputs(
        "Transform",
        "transform_graph",
        lambda uri: normalization_from_transform(tft.TFTransformOutput(uri)),
    )
    assert on_cluster.mean == pytest.approx(direct.mean)
    assert on_cluster.std == pytest.approx(direct.std)
    # Training is not bit-reproducible across processes, so each run's Evaluator (TFMA, a Beam
    # job) is held to its own exported model's answers on the same eval split, which
    # EvaluationReportGen takes through the same serving signature (the Trainer's own evaluation
    # reads the Transform's features: a near-uniform model's argmax may round the other way).
    for config, run in runs.values():
        scores = read_scores(_output_uri(config, run, "EvaluationReportGen", "report"))
        served = float(np.mean(scores.probabilities.argmax(axis=1) == scores.labels))
        assert run.eval_accuracy == pytest.approx(served)
        [trainer] = [c for c in run.components if c.node == "Trainer"]
        metrics = json.loads(
            pathlib.Path(
                config.pipeline_root,
                "Trainer",
                "model_run",
                str(trainer.execution_id),
                METRICS_FILE,
            ).read_text()
        )
        assert metrics["eval_examples"] == len(scores.labels)
        workers = TRAINING_WORKERS if config is cluster_runs.config else 1
        assert metrics["replicas"] == metrics["performance"]["workers"] == workers
    on_cluster, direct = (
        {row["class"]: row["support"] for row in run.evaluation["per_class"]}
        for _, run in runs.values()
    )
    assert on_cluster == direct
