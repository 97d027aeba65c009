"""A few real training steps through the whole path: pipelines, training, evaluation, TensorBoard
logs, export."""

import dataclasses
import glob
import json
import logging
import math
import os
import signal
import socket
import subprocess
import sys
import time

import numpy as np
import pytest
import tensorflow as tf
from tensorflow.python.autograph.core import config as autograph_config

from components.training import export, runtime, train
from components.training.checkpoints import RunCheckpoints
from components.training.model import backbone_of, build_model
from components.training.preprocessing import Normalization
from components.training.trainer_config import EarlyStoppingConfig, runlocal
from data_prep.runtime import progress
from tests.components.training.conftest import EXAMPLES_PER_SHARD, LABEL_NAMES, SHARDS
from tests.data_prep import image_files

NORMALIZATION = Normalization(mean=(127.0, 127.0, 127.0), std=(64.0, 64.0, 64.0))


def _scalars(log_dir) -> dict[str, dict[int, float]]:
    """tag -> step -> value of the run's TensorBoard scalars."""
    scalars = {}
    for path in tf.io.gfile.glob(str(log_dir / "events.out.tfevents.*")):
        for event in tf.compat.v1.train.summary_iterator(path):
            for value in event.summary.value:
                number = float(tf.make_ndarray(value.tensor)) if value.HasField("tensor") else 0
                scalars.setdefault(value.tag, {})[event.step] = number
    return scalars


def _scalar_tags(log_dir) -> set[str]:
    return set(_scalars(log_dir))


@pytest.mark.slow
def test_tiny_training_run_exports_a_working_model(shard_pattern, tmp_path, capsys):
    # 3 steps per epoch, 2 per graph call: epochs end mid-call, so calls of 1 step happen too.
    config = dataclasses.replace(runlocal(), epochs=2, profile_steps=(2, 3))
    rules = autograph_config.CONVERSION_RULES
    metrics = train.train(
        config, shard_pattern, shard_pattern, LABEL_NAMES, NORMALIZATION, str(tmp_path)
    )

    # Building, training, evaluating and exporting leave TensorFlow's AutoGraph settings alone.
    assert autograph_config.CONVERSION_RULES is rules
    assert not any(rule.matches("tf_keras") for rule in rules)

    batch = runlocal().batch_size
    assert metrics["replicas"] == 1 and metrics["global_batch_size"] == batch
    assert metrics["steps_per_epoch"] == SHARDS * EXAMPLES_PER_SHARD // batch
    assert metrics["optimizer_steps"] == 2 * metrics["steps_per_epoch"]
    assert 0.0 <= metrics["eval_accuracy"] <= 1.0 and np.isfinite(metrics["train_loss"])
    assert metrics["eval_examples"] == SHARDS * EXAMPLES_PER_SHARD
    # Static shapes and a tensor step count: traced once, across epochs and shorter calls.
    assert metrics["train_function_traces"] == 1
    assert "cache on" in metrics["input_pipeline"]["train"]
    performance = metrics["performance"]
    assert performance["retraces"] == 0 and performance["xla"] is False
    # precision "auto": what this machine's device picks (mixed_bfloat16 on CPUs with native bf16).
    assert performance["precision"] == runtime.choose_precision(config)
    assert performance["measured_steps"] > 0
    assert performance["images_per_second"] > 0 and 0 <= performance["input_wait_share"] <= 1
    assert performance["step_cpu_seconds"] > 0
    with open(tmp_path / "performance_report.json") as handle:
        assert json.load(handle) == performance
    assert {
        "train/loss",
        "train/accuracy",
        "train/learning_rate",
        "perf/images_per_second",
        "perf/step_time_seconds",
        "perf/input_wait_seconds",
        "perf/step_cpu_seconds",
        "eval/accuracy",
    } <= _scalar_tags(tmp_path / "logs")
    # Validated at each epoch's end: on TensorBoard, in the history and the metrics.
    steps = metrics["steps_per_epoch"]
    eval_curve = _scalars(tmp_path / "logs")["eval/accuracy"]
    assert sorted(eval_curve) == [steps, 2 * steps]
    assert [record["epoch"] for record in metrics["validations"]] == [1, 2]
    assert eval_curve[2 * steps] == pytest.approx(metrics["eval_accuracy"])
    assert metrics["exported_epoch"] == 2 and not metrics["stopped_early"]
    assert metrics["stop_reason"] == "the schedule ended" and metrics["epochs_trained"] == 2
    assert metrics["validation_seconds"] > 0
    assert glob.glob(str(tmp_path / "logs" / "plugins" / "profile" / "*" / "*.xplane.pb"))
    assert not (tmp_path / "checkpoints").exists()  # removed once the model is exported
    printed = capsys.readouterr().out
    assert "input pipeline train: 2 shard(s)" in printed
    # One evaluation graph for every validation.
    assert metrics["performance"]["retraces"] == 0 and "input pipeline eval:" in printed

    _assert_serves(metrics["serving_model_dir"])


def _assert_serves(model_dir: str) -> None:
    """The exported model scores an image into one probability per class."""
    loaded = tf.saved_model.load(model_dir)
    outputs = loaded.signatures[export.IMAGES_SIGNATURE](
        images=tf.constant([image_files.jpeg(seed=50)])
    )
    assert outputs["probabilities"].shape == (1, len(LABEL_NAMES))


@pytest.mark.slow
def test_gradient_accumulation_multiplies_the_examples_per_step(shard_pattern, tmp_path):
    config = dataclasses.replace(runlocal(), batch_size=2, gradient_accumulation_steps=2)
    metrics = train.train(
        config, shard_pattern, shard_pattern, LABEL_NAMES, NORMALIZATION, str(tmp_path)
    )
    assert metrics["global_batch_size"] == 4
    assert metrics["steps_per_epoch"] == SHARDS * EXAMPLES_PER_SHARD // 4
    assert metrics["performance"]["gradient_accumulation_steps"] == 2


def _train_in_child(spec: dict, env: dict | None = None, **popen) -> subprocess.Popen:
    command = [sys.executable, "-m", "tests.components.training.train_child", json.dumps(spec)]
    return subprocess.Popen(
        command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, **popen
    )


def _finish(child: subprocess.Popen, timeout: float = 300) -> tuple[dict, str]:
    """The child's training metrics and everything it printed."""
    stdout, stderr = child.communicate(timeout=timeout)
    assert child.returncode == 0, stderr[-3000:]
    return json.loads(stdout.split("METRICS")[-1]), stdout


@pytest.mark.slow
def test_two_cpu_replicas_share_the_global_batch(shard_pattern, tmp_path):
    """The multi-replica path, on two logical CPUs (set before TensorFlow starts, so in a child)."""
    spec = {"pattern": shard_pattern, "output_dir": str(tmp_path), "logical_cpus": 2}
    metrics, printed = _finish(_train_in_child(spec))

    assert metrics["replicas"] == 2
    assert metrics["global_batch_size"] == 2 * runlocal().batch_size
    # Reported at training start: one input pipeline, batching per replica.
    assert "input pipeline 1 of 1 reads 2 shard(s), batches 4 per replica for 2" in printed
    assert metrics["steps_per_epoch"] == SHARDS * EXAMPLES_PER_SHARD // (2 * runlocal().batch_size)
    assert metrics["performance"]["replicas"] == 2 and metrics["performance"]["retraces"] == 0


def _latest_step(checkpoint_dir) -> int:
    latest = tf.train.latest_checkpoint(str(checkpoint_dir))
    return int(latest.rsplit("-", 1)[-1]) if latest else 0


@pytest.mark.slow
def test_a_killed_run_resumes_from_its_last_checkpoint(shard_pattern, tmp_path):
    """SIGKILL mid-training, start again with the same checkpoint folder: training continues at
    the checkpoint's step (optimizer state restored; see test_checkpoints) and ends at the same
    total number of optimizer steps, then the checkpoints are removed."""
    config = {"epochs": 100, "checkpoint_every_steps": 4, "validation_every_steps": 300}
    # 300 steps of 4 examples, scored once at the end: the per-epoch scoring is tested elsewhere.
    checkpoints = tmp_path / "checkpoints"
    spec = {
        "pattern": shard_pattern,
        "output_dir": str(tmp_path / "first"),
        "checkpoint_dir": str(checkpoints),
        "config": config,
    }
    child = _train_in_child(spec)
    deadline = time.monotonic() + 240
    while _latest_step(checkpoints) < 8 and child.poll() is None and time.monotonic() < deadline:
        time.sleep(0.2)
    assert child.poll() is None, "the first run ended before it could be killed"
    os.kill(child.pid, signal.SIGKILL)
    child.wait()
    killed_at = _latest_step(checkpoints)
    assert killed_at >= 8 and killed_at % 4 == 0

    resumed = train.train(
        dataclasses.replace(runlocal(), **config),
        shard_pattern,
        shard_pattern,
        LABEL_NAMES,
        NORMALIZATION,
        str(tmp_path / "second"),
        checkpoint_dir=str(checkpoints),
    )
    assert resumed["resumed_from_step"] == killed_at
    assert resumed["optimizer_steps"] == 100 * resumed["steps_per_epoch"]
    assert not checkpoints.exists()
    _assert_serves(resumed["serving_model_dir"])


def _free_ports(count: int) -> list[int]:
    sockets = [socket.socket() for _ in range(count)]
    for sock in sockets:
        sock.bind(("127.0.0.1", 0))
    ports = [sock.getsockname()[1] for sock in sockets]
    for sock in sockets:
        sock.close()
    return ports


@pytest.mark.slow
def test_two_workers_train_together_and_only_the_chief_exports(shard_pattern, tmp_path):
    """MultiWorkerMirroredStrategy from TF_CONFIG: two processes on 127.0.0.1, one replica each."""
    workers = [f"127.0.0.1:{port}" for port in _free_ports(2)]
    children = []
    for index in range(2):
        tf_config = {"cluster": {"worker": workers}, "task": {"type": "worker", "index": index}}
        spec = {
            "pattern": shard_pattern,
            "output_dir": str(tmp_path / f"worker{index}"),
            "serving_model_dir": str(tmp_path / "serving_model"),
            "checkpoint_dir": str(tmp_path / "checkpoints"),
            "config": {"epochs": 2, "checkpoint_every_steps": 1},
        }
        env = {**os.environ, "TF_CONFIG": json.dumps(tf_config)}
        children.append(_train_in_child(spec, env))
    chief, worker = (_finish(child)[0] for child in children)

    for metrics in (chief, worker):
        assert metrics["replicas"] == 2 and metrics["performance"]["workers"] == 2
        assert metrics["global_batch_size"] == 2 * runlocal().batch_size
        assert metrics["optimizer_steps"] == 2 * metrics["steps_per_epoch"]
        # Each worker evaluates its share of the batches; the metrics are summed over both.
        assert metrics["eval_examples"] == SHARDS * EXAMPLES_PER_SHARD
    assert (chief["eval_loss"], chief["eval_accuracy"]) == (
        worker["eval_loss"],
        worker["eval_accuracy"],
    )
    assert chief["chief"] and not worker["chief"]
    assert chief["serving_model_dir"] == str(tmp_path / "serving_model")
    assert worker["serving_model_dir"] is None
    _assert_serves(chief["serving_model_dir"])
    assert (tmp_path / "worker0" / "performance_report.json").exists()
    assert not (tmp_path / "worker1").exists()  # no summaries, report or export from the worker


def test_too_few_examples_for_one_batch_fails_before_training(shard_pattern, tmp_path):
    config = dataclasses.replace(runlocal(), batch_size=64, shuffle_buffer=640)
    with pytest.raises(ValueError, match="do not fill one global batch of 64"):
        train.train(config, shard_pattern, shard_pattern, LABEL_NAMES, NORMALIZATION, str(tmp_path))
    assert not (tmp_path / "serving_model").exists()


def _weights_file(directory) -> str:
    """A small_cnn backbone weights file, as a user would bring one."""
    path = str(directory / "backbone.h5")
    backbone_of(build_model(runlocal(), len(LABEL_NAMES))).save_weights(path)
    return path


@pytest.mark.slow
@pytest.mark.parametrize(
    ("min_phase_steps", "stretch", "epochs"),
    [(0, True, 2), (4, True, 4), (4, False, 2)],
    ids=["epochs", "stretched_to_min_steps", "epochs_obeyed_with_a_warning"],
)
def test_fine_tuning_runs_both_phases_each_traced_once(
    shard_pattern, tmp_path, caplog, min_phase_steps, stretch, epochs
):
    """1 frozen + 1 fine-tuning epoch of 3 steps; a floor of 4 steps makes each phase 2 epochs,
    unless the epochs are obeyed as given (then a warning names the short phases)."""
    config = dataclasses.replace(
        runlocal(),
        epochs=2,
        frozen_epochs=1,
        weights_path=_weights_file(tmp_path),
        min_phase_steps=min_phase_steps,
        stretch_epochs=stretch,
    )
    with caplog.at_level(logging.INFO):
        metrics = train.train(
            config, shard_pattern, shard_pattern, LABEL_NAMES, NORMALIZATION, str(tmp_path / "run")
        )
    notices = [progress.parse_notice(r.getMessage()) for r in caplog.records]
    stretched = [text for text in notices if text and "stretched" in text]
    if epochs > config.epochs:  # the console says what the run changed
        (line,) = stretched
        assert line.startswith(f"trainer.epochs=2 stretched to {epochs} epochs: ")
        assert "make 3 steps per epoch" in line and "trainer.min_phase_steps=4 steps" in line
    else:
        assert stretched == []
    few = [text for text in notices if text and "few optimizer steps" in text]
    if not stretch:
        (line,) = few
        assert line.startswith("warning: trainer.epochs=2 gives few optimizer steps (frozen 3, ")
        assert "fine_tune 3; 14 training examples make 3 steps per epoch)" in line
    else:
        assert few == []

    assert metrics["phases"] == ["frozen", "fine_tune"]
    assert metrics["steps_per_epoch"] == 3
    assert metrics["epochs"] == epochs
    assert metrics["optimizer_steps"] == epochs * metrics["steps_per_epoch"]
    performance = metrics["performance"]
    assert performance["graphs"] == 2 and performance["traces"] == 2
    assert performance["retraces"] == 0


class _Killed(Exception):
    pass


@pytest.mark.slow
@pytest.mark.parametrize(
    ("every", "killed_at", "graphs"),
    [(2, 2, 2), (3, 3, 1)],
    ids=["killed_in_the_frozen_phase", "killed_at_the_boundary"],
)
def test_a_resumed_fine_tuning_run_continues_in_the_right_phase(
    shard_pattern, tmp_path, monkeypatch, every, killed_at, graphs
):
    """3 steps per epoch, the frozen phase is the first epoch. The first run dies right after
    its checkpoint at `killed_at`; the second resumes there: in the frozen phase it still trains
    the frozen phase's last step and then fine-tunes (two graphs), at the boundary it goes
    straight to fine-tuning (one graph). Either way the backbone changes only after step 3."""
    weights = _weights_file(tmp_path)
    config = dataclasses.replace(
        runlocal(), epochs=2, frozen_epochs=1, weights_path=weights, checkpoint_every_steps=every
    )
    checkpoints = tmp_path / "checkpoints"
    save = RunCheckpoints.maybe_save

    def save_then_die(self, step):
        save(self, step)
        if step == killed_at:
            self.finish(delete=False)  # the checkpoint is on disk, as after a real kill
            raise _Killed

    monkeypatch.setattr(RunCheckpoints, "maybe_save", save_then_die)
    with pytest.raises(_Killed):
        train.train(
            config,
            shard_pattern,
            shard_pattern,
            LABEL_NAMES,
            NORMALIZATION,
            str(tmp_path / "first"),
            checkpoint_dir=str(checkpoints),
        )
    monkeypatch.setattr(RunCheckpoints, "maybe_save", save)
    # At the checkpoint the backbone still holds the weights file's values: frozen until step 3.
    original = build_model(config, len(LABEL_NAMES), NORMALIZATION)
    restored = build_model(config, len(LABEL_NAMES), NORMALIZATION)
    tf.train.Checkpoint(model=restored).restore(
        tf.train.latest_checkpoint(str(checkpoints))
    ).expect_partial()
    for expected, actual in zip(
        backbone_of(original).get_weights(), backbone_of(restored).get_weights(), strict=True
    ):
        np.testing.assert_array_equal(expected, actual)
    assert not np.array_equal(
        original.get_layer("probabilities").get_weights()[0],
        restored.get_layer("probabilities").get_weights()[0],
    )

    resumed = train.train(
        config,
        shard_pattern,
        shard_pattern,
        LABEL_NAMES,
        NORMALIZATION,
        str(tmp_path / "second"),
        checkpoint_dir=str(checkpoints),
    )

    assert resumed["resumed_from_step"] == killed_at
    assert resumed["optimizer_steps"] == 2 * resumed["steps_per_epoch"]
    assert resumed["performance"]["graphs"] == graphs
    assert resumed["performance"]["retraces"] == 0


@pytest.mark.slow
def test_warm_start_trains_warm_start_epochs_from_the_base_model(shard_pattern, tmp_path):
    first = train.train(
        runlocal(), shard_pattern, shard_pattern, LABEL_NAMES, NORMALIZATION, str(tmp_path / "a")
    )
    config = dataclasses.replace(runlocal(), warm_start_epochs=2)
    warm = train.train(
        config,
        shard_pattern,
        shard_pattern,
        LABEL_NAMES,
        NORMALIZATION,
        str(tmp_path / "b"),
        base_model_dir=first["serving_model_dir"],
    )
    assert warm["phases"] == ["warm_start"] and warm["epochs"] == 2
    assert warm["optimizer_steps"] == 2 * warm["steps_per_epoch"]
    assert warm["warm_started_from"] == first["serving_model_dir"]


@pytest.mark.slow
def test_fine_tuning_with_soft_labels_on_two_replicas_in_mixed_float16(shard_pattern, tmp_path):
    """Both phases and the soft-label stage under MirroredStrategy (two logical CPUs) with loss
    scaling: one trace per phase, a finite loss, and evaluation on the int labels as always.
    CutMix takes the same path here as MixUp: the input pipeline's tests cover how each mixes."""
    config = {
        "epochs": 2,
        "frozen_epochs": 1,
        "weights_path": _weights_file(tmp_path),
        "precision": "mixed_float16",
        "batch_size": 2,
        "mixup_alpha": 0.2,
        "label_smoothing": 0.1,
    }
    spec = {
        "pattern": shard_pattern,
        "output_dir": str(tmp_path),
        "logical_cpus": 2,
        "config": config,
    }
    metrics, printed = _finish(_train_in_child(spec))

    assert metrics["replicas"] == 2 and metrics["phases"] == ["frozen", "fine_tune"]
    performance = metrics["performance"]
    assert performance["precision"] == "mixed_float16"
    assert performance["graphs"] == 2 and performance["retraces"] == 0
    assert math.isfinite(metrics["train_loss"]) and math.isfinite(metrics["eval_loss"])
    assert 0.0 <= metrics["eval_accuracy"] <= 1.0
    assert "soft labels (" in printed


# No improvement can beat a min_delta of 1 in accuracy: the first validation stays the best.
NEVER_BETTER = {"patience": 1, "metric": "accuracy", "min_delta": 1.0}


@pytest.mark.slow
def test_early_stopping_stops_and_restore_best_exports_the_best_epoch(shard_pattern, tmp_path):
    config = dataclasses.replace(
        runlocal(),
        epochs=4,
        early_stopping=EarlyStoppingConfig(**NEVER_BETTER),
        restore_best=True,
    )
    metrics = train.train(
        config, shard_pattern, shard_pattern, LABEL_NAMES, NORMALIZATION, str(tmp_path)
    )
    assert metrics["stopped_early"] and metrics["optimizer_steps"] == 2 * metrics["steps_per_epoch"]
    assert metrics["stop_reason"] == (
        "early stopping: eval accuracy did not improve by more than 1 in 1 validation after epoch 1"
    )
    assert metrics["best_epoch"] == 1 and metrics["exported_epoch"] == 1
    assert metrics["restored_best"]
    first = metrics["validations"][0]
    assert (metrics["eval_accuracy"], metrics["eval_loss"]) == pytest.approx(
        (first["accuracy"], first["loss"])
    )


@pytest.mark.slow
def test_the_best_epoch_survives_a_resume(shard_pattern, tmp_path, monkeypatch):
    """The first run dies after its checkpoint at the end of epoch 2; the resumed run never sees
    epoch 1 and still exports it, as the best, with its figures."""
    config = dataclasses.replace(
        runlocal(),
        epochs=3,
        checkpoint_every_steps=3,
        early_stopping=EarlyStoppingConfig(**{**NEVER_BETTER, "patience": 0}),
        restore_best=True,
    )
    checkpoints = tmp_path / "checkpoints"
    save = RunCheckpoints.maybe_save

    def save_then_die(self, step):
        save(self, step)
        if step == 6:
            self.finish(delete=False)
            raise _Killed

    monkeypatch.setattr(RunCheckpoints, "maybe_save", save_then_die)
    with pytest.raises(_Killed):
        train.train(
            config,
            shard_pattern,
            shard_pattern,
            LABEL_NAMES,
            NORMALIZATION,
            str(tmp_path / "first"),
            checkpoint_dir=str(checkpoints),
        )
    monkeypatch.setattr(RunCheckpoints, "maybe_save", save)
    first_epoch = _scalars(tmp_path / "first" / "logs")["eval/accuracy"][3]
    resumed = train.train(
        config,
        shard_pattern,
        shard_pattern,
        LABEL_NAMES,
        NORMALIZATION,
        str(tmp_path / "second"),
        checkpoint_dir=str(checkpoints),
    )
    assert resumed["resumed_from_step"] == 6
    assert [record["epoch"] for record in resumed["validations"]] == [3]
    assert resumed["exported_epoch"] == 1 and resumed["restored_best"]
    assert resumed["eval_accuracy"] == pytest.approx(first_epoch)
