"""The training run in one call: plan the inputs and phases, build the model, resume from a
checkpoint, run the loop (loop.py), evaluate, export, and write the performance report.

The TFX Trainer's run_fn only maps its arguments onto train(); the CLI and tests call it directly.
On a multi-worker cluster every worker calls train() with the same arguments (TF_CONFIG tells them
apart); only the chief writes summaries, checkpoints, the report and the exported model.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import shutil
import tempfile
from collections.abc import Callable

import tensorflow as tf
import tf_keras as keras

from components.training import input_pipeline, runtime
from components.training.best_validation import BestValidation
from components.training.checkpoints import RunCheckpoints
from components.training.engine import TrainingEngine
from components.training.export import export_model
from components.training.loop import RunPlan, TrainingLoop
from components.training.model import build_model
from components.training.preprocessing import Normalization
from components.training.report import PerformanceReport, write_report
from components.training.schedule import (
    ADAM_BETA_1,
    ADAM_BETA_2,
    Phase,
    PhasedSchedule,
    plan_phases,
)
from components.training.trainer_config import TrainerConfig, imagenet_download_problem
from components.training.warm_start import load_base_weights
from data_prep.ingest_config import ConfigError
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
    """Trains (resuming from checkpoint_dir when it holds a checkpoint), validating on the eval
    split as it goes, and exports the last (or with restore_best the best) weights; returns the
    metrics, with the performance report under 'performance'.

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
    check_settings(config, normalization)
    strategy = strategy or runtime.make_strategy(config)
    keras.utils.set_random_seed(config.seed)
    warm_start = base_model_dir is not None
    plan = plan_run(config, train_files, eval_files, strategy.num_replicas_in_sync, warm_start)
    chief = strategy.extended.should_checkpoint
    parts = build_run(
        config,
        plan,
        label_names,
        normalization,
        strategy,
        checkpoint_dir or os.path.join(output_dir, "checkpoints"),
        base_model_dir,
    )
    start_step = parts.checkpoints.restore()
    dataset_fn = training_dataset_fn(config, plan, normalization, len(label_names), start_step)
    iterator = runtime.training_iterator(strategy, dataset_fn)
    eval_data = input_pipeline.eval_dataset(plan.eval, config.image_size, normalization)
    if config.report_input_pipeline:
        print(f"input pipeline {plan.eval.describe()}", flush=True)
    loop, evaluation = run_loop(config, plan, parts, start_step, iterator, eval_data, output_dir)

    serving_model_dir = serving_model_dir or os.path.join(output_dir, "serving_model")
    export(parts.model, serving_model_dir, config, label_names, normalization, chief)
    parts.checkpoints.finish(delete=True)
    report = performance_report(config, loop, parts.precision, parts.jit_compile, strategy)
    if chief:
        write_report(report.to_dict(), output_dir)
    metrics = run_metrics(plan, loop, evaluation, report, base_model_dir)
    metrics["serving_model_dir"] = serving_model_dir if chief else None
    logging.info("training finished: %s", metrics)
    return metrics


def check_settings(config: TrainerConfig, normalization: Normalization) -> None:
    """Fails before any work on settings that cannot train: a bad field, ImageNet weights that
    cannot be had, unusable pixel statistics."""
    config.validate()
    problem = imagenet_download_problem(config)
    if problem:
        raise ConfigError("weights", problem)
    normalization.validate()


@dataclasses.dataclass(frozen=True)
class RunParts:
    """What one training run trains with: built under the strategy's scope, checkpointed
    together."""

    model: keras.Model
    optimizer: keras.optimizers.Optimizer
    schedule: PhasedSchedule
    engine: TrainingEngine
    best: BestValidation
    checkpoints: RunCheckpoints
    precision: str
    jit_compile: bool


def build_run(
    config: TrainerConfig,
    plan: RunPlan,
    label_names: list[str],
    normalization: Normalization,
    strategy: tf.distribute.Strategy,
    checkpoint_dir: str,
    base_model_dir: str | None,
) -> RunParts:
    """The model, optimizer, training step, best-validation keeper and checkpoints of a run,
    under the precision and XLA setting the device calls for."""
    precision = runtime.choose_precision(config)
    jit_compile = runtime.choose_jit_compile(config)
    with strategy.scope():
        model, optimizer, schedule = model_and_optimizer(
            config, label_names, precision, plan.phases, normalization, base_model_dir
        )
        engine = TrainingEngine(
            model, optimizer, strategy, config.gradient_accumulation_steps, jit_compile
        )
        best = BestValidation(model, config.early_stopping, keep_weights=config.restore_best)
    checkpoints = RunCheckpoints(
        checkpoint_dir, model, optimizer, config.checkpoint_every_steps, strategy, best
    )
    return RunParts(model, optimizer, schedule, engine, best, checkpoints, precision, jit_compile)


def run_loop(
    config: TrainerConfig,
    plan: RunPlan,
    parts: RunParts,
    start_step: int,
    iterator,
    eval_data: tf.data.Dataset,
    output_dir: str,
) -> tuple[TrainingLoop, dict]:
    """Runs the training loop from start_step with its summaries in output_dir/logs (the chief's
    only), keeps the last checkpoint, and evaluates the weights to export."""
    log_dir = os.path.join(output_dir, "logs")
    loop = TrainingLoop(
        config,
        plan,
        parts.engine,
        parts.checkpoints,
        parts.best,
        parts.schedule,
        log_dir,
        start_step,
    )
    chief = parts.checkpoints.chief  # summaries are the chief's alone
    writer = tf.summary.create_file_writer(log_dir) if chief else tf.summary.create_noop_writer()
    with writer.as_default():
        loop.run(iterator, eval_data)
        parts.checkpoints.finish(delete=False)
        evaluation = loop.final_evaluation(eval_data)
    writer.close()
    return loop, evaluation


def plan_run(
    config: TrainerConfig,
    train_files: list[str] | str,
    eval_files: list[str] | str,
    replicas: int,
    warm_start: bool,
) -> RunPlan:
    """Counts both splits, decides their caches, the batches and the phases; fails before any
    training when the training split cannot fill one step. Says so when the phases stretch the
    epochs asked for."""
    accumulation = config.gradient_accumulation_steps
    global_batch = config.batch_size * replicas
    step_batch = global_batch * accumulation
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
    phases = plan_phases(config, steps_per_epoch, warm_start)
    plan = RunPlan(train_plan, eval_plan, replicas, step_batch, steps_per_epoch, phases)
    if runtime.is_chief_task() and not warm_start:
        _say_schedule(config, plan, train_plan.examples)
    return plan


def _say_schedule(config: TrainerConfig, plan: RunPlan, examples: int) -> None:
    """A notice when the phases stretch the epochs asked for, or when epochs obeyed as given
    leave a phase below trainer.min_phase_steps (a head that moves little from chance)."""
    per_epoch = f"{examples} training examples make {plan.steps_per_epoch} steps per epoch"
    if plan.epochs > config.epochs:
        logging.info("phases stretched: %s", plan.phases)
        progress.notice(
            logging.getLogger(__name__),
            f"trainer.epochs={config.epochs} stretched to {plan.epochs} epochs: {per_epoch}, "
            f"and each phase trains at least trainer.min_phase_steps={config.min_phase_steps} "
            "steps (set it lower to train fewer epochs)",
        )
        return
    short = [phase for phase in plan.phases if phase.steps < config.min_phase_steps]
    if short:
        steps = ", ".join(f"{phase.name} {phase.steps}" for phase in short)
        progress.notice(
            logging.getLogger(__name__),
            f"warning: trainer.epochs={config.epochs} gives few optimizer steps ({steps}; "
            f"{per_epoch}): a phase under trainer.min_phase_steps={config.min_phase_steps} "
            "steps may leave the model near chance; train more epochs, or leave "
            "trainer.epochs unset to stretch them",
        )


def training_dataset_fn(
    config: TrainerConfig,
    plan: RunPlan,
    normalization: Normalization,
    classes: int,
    start_step: int,
) -> Callable[[tf.distribute.InputContext], tf.data.Dataset]:
    """The function each worker calls once for its training dataset: its shards, batched per
    replica. A resumed run reshuffles with a new seed rather than replaying the first run's
    order."""
    soft_labels = input_pipeline.SoftLabels.of(config, classes)

    def dataset_fn(input_context: tf.distribute.InputContext) -> tf.data.Dataset:
        if config.report_input_pipeline:
            described = plan.train.describe(input_context, config.augment)
            if soft_labels is not None:
                described += f", {soft_labels.describe()}"
            print(f"input pipeline {described}", flush=True)
        return input_pipeline.training_dataset(
            plan.train,
            config.image_size,
            normalization,
            config.shuffle_buffer,
            config.seed + start_step,
            input_context,
            soft_labels,
            config.augment,
        )

    return dataset_fn


def export(
    model: keras.Model,
    serving_model_dir: str,
    config: TrainerConfig,
    label_names: list[str],
    normalization: Normalization,
    chief: bool,
) -> None:
    """Exports the model to serving_model_dir. Every worker saves (reading synchronized
    variables is a collective); only the chief keeps what it saved."""
    export_dir = serving_model_dir if chief else tempfile.mkdtemp(prefix="export-")
    export_model(model, export_dir, config.image_size, label_names, normalization)
    if not chief:
        shutil.rmtree(export_dir, ignore_errors=True)


def performance_report(
    config: TrainerConfig,
    loop: TrainingLoop,
    precision: str,
    jit_compile: bool,
    strategy: tf.distribute.Strategy,
) -> PerformanceReport:
    """How fast the loop trained, and under which settings."""
    engine = loop.engine
    return PerformanceReport.from_times(
        loop.times,
        engine.traces,
        loop.plan.step_batch,
        graphs=engine.graphs,
        precision=precision,
        xla=jit_compile,
        replicas=loop.plan.replicas,
        workers=runtime.cluster_workers(),
        devices=runtime.device_names(strategy),
        gradient_accumulation_steps=config.gradient_accumulation_steps,
        steps_per_execution=config.steps_per_execution,
    )


def run_metrics(
    plan: RunPlan,
    loop: TrainingLoop,
    evaluation: dict,
    report: PerformanceReport,
    base_model_dir: str | None,
) -> dict:
    """What train() returns (and the Trainer records): the evaluation, the last epoch's training
    figures, what the run did and how fast."""
    last = loop.history[-1] if loop.history else {}
    engine = loop.engine
    return {
        "eval_accuracy": evaluation["accuracy"],
        "eval_loss": evaluation["loss"],
        "eval_examples": evaluation["examples"],
        **loop.outcome(),
        "train_accuracy": last.get("accuracy"),
        "train_loss": last.get("loss"),
        "epochs": plan.epochs,
        "epochs_trained": plan.epochs_at(int(engine.optimizer.iterations.numpy())),
        "phases": [phase.name for phase in plan.phases],
        "warm_started_from": base_model_dir,
        "steps_per_epoch": plan.steps_per_epoch,
        "optimizer_steps": int(engine.optimizer.iterations.numpy()),
        "resumed_from_step": loop.start_step,
        "replicas": plan.replicas,
        "global_batch_size": plan.step_batch,
        "chief": loop.chief,
        # Wall time of the training loop, tracing included, validations excluded.
        "train_seconds": loop.train_seconds,
        "train_function_traces": engine.traces,
        "performance": report.to_dict(),
        "input_pipeline": {split.split: split.describe() for split in (plan.train, plan.eval)},
    }


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
    optimizer = keras.optimizers.Adam(schedule, beta_1=ADAM_BETA_1, beta_2=ADAM_BETA_2)
    if precision == "mixed_float16":
        optimizer = keras.mixed_precision.LossScaleOptimizer(optimizer)
    # Slot variables made now for every variable that trains in any phase (all are trainable
    # before apply_phase), not in the first step, which would then be traced twice, and so that
    # a checkpoint restores into them at once, whichever phase it was written in.
    optimizer.build(model.trainable_variables)
    return model, optimizer, schedule
