"""The training run: distribution, input pipelines, the graph-mode training loop, checkpoints,
TensorBoard, evaluation, export and the performance report in one call.

The TFX Trainer's run_fn only maps its arguments onto train(); the CLI and tests call it directly.
On a multi-worker cluster every worker calls train() with the same arguments (TF_CONFIG tells them
apart); only the chief writes summaries, checkpoints, the report and the exported model.
"""

from __future__ import annotations

import logging
import math
import os
import shutil
import tempfile
import time

import tensorflow as tf
import tf_keras as keras

from components.training import input_pipeline, runtime
from components.training.checkpoints import RunCheckpoints
from components.training.engine import TrainingEngine
from components.training.export import export_model
from components.training.model import build_model
from components.training.preprocessing import Normalization
from components.training.report import PerformanceReport, StepTimes, write_report
from components.training.schedule import Phase, PhasedSchedule, apply_phase, phase_at, plan_phases
from components.training.trainer_config import TrainerConfig
from components.training.warm_start import load_base_weights
from data_prep.runtime import progress


def train(
    config: TrainerConfig,
    train_files: list[str] | str,
    eval_files: list[str] | str,
    label_names: list[str],
    normalization: Normalization,
    output_dir: str,
    serving_model_dir: str | None = None,
    checkpoint_dir: str | None = None,
    strategy: tf.distribute.Strategy | None = None,
    base_model_dir: str | None = None,
) -> dict:
    """Trains (resuming from checkpoint_dir when it holds a checkpoint), evaluates on the eval
    split and exports; returns the metrics, with the performance report under 'performance'.

    Args:
      train_files, eval_files: gzip TFRecord shards of tf.Examples, or glob patterns.
      label_names: class names in label-id order.
      normalization: the train split's per-channel pixel statistics.
      output_dir: TensorBoard logs go to output_dir/logs, the performance report beside them.
      serving_model_dir: where the SavedModel goes; default output_dir/serving_model.
      checkpoint_dir: a folder that stays the same when the same run is started again; default
        output_dir/checkpoints. Deleted once the model is exported.
      strategy: default runtime.make_strategy(config); pass one made at process start-up when
        TensorFlow may otherwise start first (MultiWorkerMirroredStrategy must come first).
      base_model_dir: an exported model (serving dir) of the same architecture and classes to
        warm-start from (config.warm_start); trains config.warm_start_epochs instead of the
        full schedule.
    """
    config.validate()
    normalization.validate()
    strategy = strategy or runtime.make_strategy(config)
    keras.utils.set_random_seed(config.seed)
    replicas = strategy.num_replicas_in_sync
    accumulation = config.gradient_accumulation_steps
    global_batch = config.batch_size * replicas
    step_batch = global_batch * accumulation  # examples per optimizer step
    chief = strategy.extended.should_checkpoint

    train_plan = input_pipeline.plan_pipeline(
        "train", train_files, config.image_size, step_batch, config.cache_budget_bytes, True
    )
    eval_budget = config.cache_budget_bytes - train_plan.cache_bytes
    eval_plan = input_pipeline.plan_pipeline(
        "eval", eval_files, config.image_size, global_batch, eval_budget, False
    )
    steps_per_epoch = train_plan.examples // step_batch
    if steps_per_epoch == 0:
        raise ValueError(
            f"{train_plan.examples} training examples do not fill one global batch of "
            f"{step_batch} ({config.batch_size} per replica x {replicas} replicas x "
            f"{accumulation} accumulated micro-batches)"
        )
    warm_start = base_model_dir is not None
    phases = plan_phases(config, steps_per_epoch, warm_start)
    total_steps = phases[-1].end_step
    epochs = total_steps // steps_per_epoch
    if chief and not warm_start and epochs > config.epochs:  # one notice, not one a worker
        logging.info("phases stretched: %s", phases)
        progress.notice(
            logging.getLogger(__name__),
            f"trainer.epochs={config.epochs} stretched to {epochs} epochs: {train_plan.examples} "
            f"training examples make {steps_per_epoch} steps per epoch, and each phase trains "
            f"at least trainer.min_phase_steps={config.min_phase_steps} steps (set it lower "
            "to train fewer epochs)",
        )

    precision = runtime.choose_precision(config)
    jit_compile = runtime.choose_jit_compile(config)
    with strategy.scope():
        model, optimizer, schedule = model_and_optimizer(
            config, label_names, precision, phases, normalization, base_model_dir
        )
        engine = TrainingEngine(model, optimizer, strategy, accumulation, jit_compile)
    checkpoints = RunCheckpoints(
        checkpoint_dir or os.path.join(output_dir, "checkpoints"),
        model,
        optimizer,
        config.checkpoint_every_steps,
        strategy,
    )
    start_step = checkpoints.restore()

    soft_labels = input_pipeline.SoftLabels.of(config, len(label_names))

    def train_dataset_fn(input_context: tf.distribute.InputContext) -> tf.data.Dataset:
        """Called once per worker: its shards, batched per replica. A resumed run reshuffles
        with a new seed rather than replaying the first run's order."""
        if config.report_input_pipeline:
            described = train_plan.describe(input_context, config.augment)
            if soft_labels is not None:
                described += f", {soft_labels.describe()}"
            print(f"input pipeline {described}", flush=True)
        return input_pipeline.training_dataset(
            train_plan,
            config.image_size,
            normalization,
            config.shuffle_buffer,
            config.seed + start_step,
            input_context,
            soft_labels,
            config.augment,
        )

    iterator = runtime.training_iterator(strategy, train_dataset_fn)
    eval_data = input_pipeline.eval_dataset(eval_plan, config.image_size, normalization)
    if config.report_input_pipeline:
        print(f"input pipeline {eval_plan.describe()}", flush=True)

    log_dir = os.path.join(output_dir, "logs")
    writer = tf.summary.create_file_writer(log_dir) if chief else tf.summary.create_noop_writer()
    times = StepTimes()
    history = []
    start = time.perf_counter()
    step = start_step
    with writer.as_default():
        while step < total_steps:
            phase = phase_at(phases, step)
            apply_phase(model, phase)
            steps = _steps_until_boundary(step, phase, steps_per_epoch, config)
            if chief and config.profile_steps and step + 1 == config.profile_steps[0]:
                tf.profiler.experimental.start(log_dir)
            wait_before = float(engine.input_wait_seconds.numpy())
            graphs_before = engine.graphs
            started, cpu_started = time.perf_counter(), time.process_time()
            loss = float(engine.run(iterator, steps))
            seconds = time.perf_counter() - started
            cpu_seconds = time.process_time() - cpu_started
            waited = float(engine.input_wait_seconds.numpy()) - wait_before
            step += steps
            if chief and config.profile_steps and step == config.profile_steps[1]:
                tf.profiler.experimental.stop()
            times.add(seconds, steps, waited, cpu_seconds, traced=engine.graphs > graphs_before)
            checkpoints.maybe_save(step)
            tf.summary.scalar("train/step_loss", loss, step=step)
            tf.summary.scalar("train/learning_rate", float(schedule(step)), step=step)
            tf.summary.scalar("perf/step_time_seconds", seconds / steps, step=step)
            tf.summary.scalar("perf/images_per_second", steps * step_batch / seconds, step=step)
            tf.summary.scalar("perf/input_wait_seconds", waited / steps, step=step)
            tf.summary.scalar("perf/step_cpu_seconds", cpu_seconds / steps, step=step)
            # Every worker reads the metrics: under MultiWorkerMirroredStrategy a read is a
            # collective, and a read by the chief alone waits for the others for ever.
            loss, accuracy = float(engine.loss.result()), float(engine.accuracy.result())
            if chief:
                progress.report(
                    logging.getLogger(__name__),
                    "training",
                    done=step - start_step,  # this process's steps: a resumed run's rate
                    total=total_steps - start_step,
                    seconds=time.perf_counter() - start,
                    epoch=math.ceil(step / steps_per_epoch),
                    epochs=epochs,
                    images_per_second=steps * step_batch / seconds,
                    loss=loss,
                    accuracy=accuracy,
                )
            if step % steps_per_epoch == 0:
                epoch = {
                    "epoch": step // steps_per_epoch,
                    "loss": float(engine.loss.result()),
                    "accuracy": float(engine.accuracy.result()),
                    "phase": phase.name,
                }
                history.append(epoch)
                tf.summary.scalar("train/loss", epoch["loss"], step=step)
                tf.summary.scalar("train/accuracy", epoch["accuracy"], step=step)
                logging.info("epoch %d/%d: %s", epoch["epoch"], epochs, epoch)
                engine.reset_metrics()
        train_seconds = time.perf_counter() - start
        checkpoints.finish(delete=False)
        evaluation = engine.evaluate(eval_data)
        tf.summary.scalar("eval/loss", evaluation["loss"], step=step)
        tf.summary.scalar("eval/accuracy", evaluation["accuracy"], step=step)
    writer.close()

    serving_model_dir = serving_model_dir or os.path.join(output_dir, "serving_model")
    # Every worker saves (reading synchronized variables is a collective); only the chief keeps it.
    export_dir = serving_model_dir if chief else tempfile.mkdtemp(prefix="export-")
    export_model(model, export_dir, config.image_size, label_names, normalization)
    if not chief:
        shutil.rmtree(export_dir, ignore_errors=True)
    checkpoints.finish(delete=True)

    report = PerformanceReport.from_times(
        times,
        engine.traces,
        step_batch,
        graphs=engine.graphs,
        precision=precision,
        xla=jit_compile,
        replicas=replicas,
        workers=runtime.cluster_workers(),
        devices=runtime.device_names(strategy),
        gradient_accumulation_steps=accumulation,
        steps_per_execution=config.steps_per_execution,
    )
    if chief:
        write_report(report.to_dict(), output_dir)
    metrics = {
        "eval_accuracy": evaluation["accuracy"],
        "eval_loss": evaluation["loss"],
        "eval_examples": evaluation["examples"],
        "train_accuracy": history[-1]["accuracy"] if history else None,
        "train_loss": history[-1]["loss"] if history else None,
        "epochs": epochs,
        "phases": [phase.name for phase in phases],
        "warm_started_from": base_model_dir,
        "steps_per_epoch": steps_per_epoch,
        "optimizer_steps": int(optimizer.iterations.numpy()),
        "resumed_from_step": start_step,
        "replicas": replicas,
        "global_batch_size": step_batch,
        "chief": chief,
        # Wall time of the training loop, tracing included, evaluation excluded.
        "train_seconds": train_seconds,
        "train_function_traces": engine.traces,
        "performance": report.to_dict(),
        "input_pipeline": {plan.split: plan.describe() for plan in (train_plan, eval_plan)},
        "serving_model_dir": serving_model_dir if chief else None,
    }
    logging.info("training finished: %s", metrics)
    return metrics


def model_and_optimizer(
    config: TrainerConfig,
    label_names: list[str],
    precision: str,
    phases: tuple[Phase, ...],
    normalization: Normalization,
    base_model_dir: str | None = None,
) -> tuple[
    keras.Model, keras.optimizers.Optimizer, keras.optimizers.schedules.LearningRateSchedule
]:
    """The model under the precision policy (with the base model's weights when warm-starting),
    and Adam on the phases' warmup + cosine schedule (wrapped for loss scaling under
    mixed_float16)."""
    previous_policy = keras.mixed_precision.global_policy()
    keras.mixed_precision.set_global_policy(precision)
    try:
        model = build_model(config, len(label_names), normalization)
    finally:
        keras.mixed_precision.set_global_policy(previous_policy)
    if base_model_dir is not None:
        load_base_weights(model, base_model_dir, label_names)
    schedule = PhasedSchedule.of(phases)
    optimizer = keras.optimizers.Adam(schedule)
    if precision == "mixed_float16":
        optimizer = keras.mixed_precision.LossScaleOptimizer(optimizer)
    # Slot variables made now for every variable that trains in any phase (all are trainable
    # before apply_phase), not in the first step, which would then be traced twice, and so that
    # a checkpoint restores into them at once, whichever phase it was written in.
    optimizer.build(model.trainable_variables)
    return model, optimizer, schedule


def _steps_until_boundary(
    step: int, phase: Phase, steps_per_epoch: int, config: TrainerConfig
) -> int:
    """Steps in the next graph call: steps_per_execution, cut short at the end of an epoch and of
    the phase, at a checkpoint, and at the start and end of the profiled range, so each happens
    on time."""
    boundaries = [phase.end_step, (step // steps_per_epoch + 1) * steps_per_epoch]
    if config.checkpoint_every_steps:
        every = config.checkpoint_every_steps
        boundaries.append((step // every + 1) * every)
    if config.profile_steps:
        boundaries += [config.profile_steps[0] - 1, config.profile_steps[1]]
    return min(config.steps_per_execution, *(b - step for b in boundaries if b > step))
