"""The training loop: distribution, input pipelines, Keras fit, evaluation and export in one call.

The TFX Trainer's run_fn only maps its arguments onto train(); the CLI and tests call it directly.
"""

from __future__ import annotations

import logging
import math
import os
import time

import tensorflow as tf
import tf_keras as keras

from components.trainer import input_pipeline
from components.trainer.config import TrainerConfig
from components.trainer.export import export_model
from components.trainer.model import build_model
from components.trainer.preprocessing import Normalization


def make_strategy() -> tf.distribute.MirroredStrategy:
    """Mirrors over every local GPU, or else every logical CPU (one, unless configured)."""
    devices = tf.config.list_logical_devices("GPU") or tf.config.list_logical_devices("CPU")
    return tf.distribute.MirroredStrategy([device.name for device in devices])


def train(
    config: TrainerConfig,
    train_files: list[str] | str,
    eval_files: list[str] | str,
    label_names: list[str],
    normalization: Normalization,
    output_dir: str,
    serving_model_dir: str | None = None,
) -> dict:
    """Trains, evaluates on the eval split and exports; returns the metrics.

    Args:
      train_files, eval_files: gzip TFRecord shards of tf.Examples, or glob patterns.
      label_names: class names in label-id order.
      normalization: the train split's per-channel pixel statistics.
      output_dir: TensorBoard logs go to output_dir/logs.
      serving_model_dir: where the SavedModel goes; default output_dir/serving_model.
    """
    config.validate()
    normalization.validate()
    keras.utils.set_random_seed(config.seed)
    strategy = make_strategy()
    replicas = strategy.num_replicas_in_sync
    global_batch = config.batch_size * replicas

    train_plan = input_pipeline.plan_pipeline(
        "train", train_files, config.image_size, global_batch, config.cache_budget_bytes, True
    )
    eval_budget = config.cache_budget_bytes - train_plan.cache_bytes
    eval_plan = input_pipeline.plan_pipeline(
        "eval", eval_files, config.image_size, global_batch, eval_budget, False
    )
    steps_per_epoch = train_plan.examples // global_batch
    if steps_per_epoch == 0:
        raise ValueError(
            f"{train_plan.examples} training examples do not fill one global batch of "
            f"{global_batch} ({config.batch_size} per replica x {replicas} replicas)"
        )

    def train_dataset_fn(input_context: tf.distribute.InputContext) -> tf.data.Dataset:
        """Called once per worker: its shards, batched per replica."""
        if config.report_input_pipeline:
            print(f"input pipeline {train_plan.describe(input_context)}", flush=True)
        return input_pipeline.training_dataset(
            train_plan,
            config.image_size,
            normalization,
            config.shuffle_buffer,
            config.seed,
            input_context,
        )

    train_data = strategy.distribute_datasets_from_function(train_dataset_fn)
    eval_data = input_pipeline.eval_dataset(eval_plan, config.image_size, normalization)
    if config.report_input_pipeline:
        print(f"input pipeline {eval_plan.describe()}", flush=True)

    with strategy.scope():
        model = build_model(config, len(label_names))
        warmup_steps = steps_per_epoch * config.warmup_epochs
        schedule = keras.optimizers.schedules.CosineDecay(
            0.0,
            decay_steps=steps_per_epoch * config.epochs - warmup_steps,
            warmup_target=config.learning_rate,
            warmup_steps=warmup_steps,
        )
        model.compile(
            optimizer=keras.optimizers.Adam(schedule),
            loss=keras.losses.SparseCategoricalCrossentropy(),
            metrics=[keras.metrics.SparseCategoricalAccuracy(name="accuracy")],
            steps_per_execution=min(config.steps_per_execution, steps_per_epoch),
        )
        # Slot variables made now, not in the first step, which would then be traced twice.
        model.optimizer.build(model.trainable_variables)
    tensorboard = keras.callbacks.TensorBoard(os.path.join(output_dir, "logs"), profile_batch=0)
    start = time.perf_counter()
    history = model.fit(
        train_data,
        epochs=config.epochs,
        steps_per_epoch=steps_per_epoch,
        validation_data=eval_data,
        validation_steps=math.ceil(eval_plan.examples / global_batch),
        callbacks=[tensorboard],
        verbose=2,
    ).history
    fit_seconds = time.perf_counter() - start

    serving_model_dir = serving_model_dir or os.path.join(output_dir, "serving_model")
    export_model(model, serving_model_dir, config.image_size, label_names, normalization)
    metrics = {
        "eval_accuracy": history["val_accuracy"][-1],
        "eval_loss": history["val_loss"][-1],
        "train_accuracy": history["accuracy"][-1],
        "train_loss": history["loss"][-1],
        "epochs": config.epochs,
        "steps_per_epoch": steps_per_epoch,
        "replicas": replicas,
        "global_batch_size": global_batch,
        # Wall time of fit, including tracing and the per-epoch evaluation.
        "fit_seconds": fit_seconds,
        "train_images_per_second": steps_per_epoch * config.epochs * global_batch / fit_seconds,
        "train_function_traces": model.train_function.experimental_get_tracing_count(),
        "input_pipeline": {plan.split: plan.describe() for plan in (train_plan, eval_plan)},
        "serving_model_dir": serving_model_dir,
    }
    logging.info("training finished: %s", metrics)
    return metrics
