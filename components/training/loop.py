"""The training loop, in the shape of TensorFlow Model Garden's base trainer on Orbit's
StandardTrainer: a short `run()` that calls named steps, each of which can be tested alone.

    while steps remain and early stopping has not stopped it:
        change_phase()           which layers train (a fine-tuning schedule's frozen phase)
        train_steps(n)           one graph call of n optimizer steps, timed
        validate()               every epoch (or validation_every_steps): the eval split scored,
                                 the best validation kept, early stopping decided
        checkpoint()             every checkpoint_every_steps (after validate: it holds the best)
        write_step_summaries()   TensorBoard: loss, learning rate, speed
        end_epoch()              at an epoch's end: its training metrics, into the history
        report_progress()        the console's progress line
    final_evaluation()           the best weights back into the model when restore_best says so

The loop owns no model code: the step is the engine's (engine.py), the schedule's phases are
planned before it starts (schedule.py), and setting up and exporting are train.py's.
"""

from __future__ import annotations

import dataclasses
import logging
import math
import time

import tensorflow as tf
import tf_keras as keras

from components.training import input_pipeline
from components.training.best_validation import BestValidation
from components.training.checkpoints import RunCheckpoints
from components.training.engine import TrainingEngine
from components.training.report import StepTimes
from components.training.schedule import Phase, apply_phase, phase_at
from components.training.trainer_config import TrainerConfig
from data_prep.runtime import progress

LOGGER = logging.getLogger(__name__)


@dataclasses.dataclass(frozen=True)
class RunPlan:
    """What a run will do, decided before it trains: its input pipelines, batches and phases."""

    train: input_pipeline.PipelinePlan
    eval: input_pipeline.PipelinePlan
    replicas: int
    step_batch: int  # examples per optimizer step, over every replica and micro-batch
    steps_per_epoch: int
    phases: tuple[Phase, ...]

    @property
    def total_steps(self) -> int:
        return self.phases[-1].end_step

    @property
    def epochs(self) -> int:
        return self.total_steps // self.steps_per_epoch

    def epoch_of(self, step: int) -> int:
        """The epoch (1-based) that optimizer step `step` (counted from 1) belongs to."""
        return math.ceil(step / self.steps_per_epoch)

    def epochs_at(self, step: int) -> float:
        """Epochs trained after `step` optimizer steps (whole at an epoch's end)."""
        return round(step / self.steps_per_epoch, 2)


@dataclasses.dataclass(frozen=True)
class GraphCall:
    """One graph call of the training step: how many steps, how long, and the last loss."""

    steps: int
    seconds: float
    input_wait: float  # seconds spent waiting for input
    cpu_seconds: float  # this process's CPU time, every thread
    loss: float


class TrainingLoop:
    """Runs a planned training from `start_step` to the plan's end on a model's engine."""

    def __init__(
        self,
        config: TrainerConfig,
        plan: RunPlan,
        engine: TrainingEngine,
        checkpoints: RunCheckpoints,
        best: BestValidation,
        schedule: keras.optimizers.schedules.LearningRateSchedule,
        log_dir: str,
        start_step: int,
    ):
        """`start_step`: the step `checkpoints` restored (0 for a fresh run), with `best`."""
        self.config = config
        self.plan = plan
        self.engine = engine
        self.checkpoints = checkpoints
        self.best = best
        self.schedule = schedule
        self.validation_interval = config.validation_every_steps or plan.steps_per_epoch
        self.log_dir = log_dir
        self.chief = engine.strategy.extended.should_checkpoint
        self.start_step = self.step = start_step
        self.times = StepTimes()
        self.history: list[dict] = []  # one record per epoch ended
        self.validations: list[dict] = []  # one record per validation
        self.stop_reason: str | None = None  # why training ended before the plan's last step
        self.exported_step = 0
        self.train_seconds = 0.0
        self._started = 0.0

    def run(self, iterator, eval_data: tf.data.Dataset) -> None:
        """Trains until the plan's last step, or until early stopping ends it; `iterator` yields
        the distributed training batches, `eval_data` the eval split's."""
        self._started = time.perf_counter()
        while self.step < self.plan.total_steps and self.stop_reason is None:
            phase = self.change_phase()
            call = self.train_steps(iterator, self.steps_until_boundary(phase))
            # Every worker reads the metrics: under MultiWorkerMirroredStrategy a read is a
            # collective, and a read by the chief alone waits for the others for ever.
            metrics = self.engine.training_metrics()
            figures = self.validate(eval_data, phase) if self.validation_due() else None
            self.checkpoint()
            self.write_step_summaries(call)
            if self.step % self.plan.steps_per_epoch == 0:
                self.end_epoch(phase, metrics, figures)
            self.report_progress(call, metrics, figures)
        validating = sum(record["seconds"] for record in self.validations)
        self.train_seconds = time.perf_counter() - self._started - validating

    def change_phase(self) -> Phase:
        """The phase of the next step, its layers set to train (a no-op within a phase)."""
        phase = phase_at(self.plan.phases, self.step)
        apply_phase(self.engine.model, phase)
        return phase

    def steps_until_boundary(self, phase: Phase) -> int:
        return steps_until_boundary(self.step, phase, self.plan.steps_per_epoch, self.config)

    def train_steps(self, iterator, steps: int) -> GraphCall:
        """One graph call of `steps` optimizer steps (profiled when the range says so), its
        times added to the performance report."""
        profile = self.config.profile_steps if self.chief else None
        if profile and self.step + 1 == profile[0]:
            tf.profiler.experimental.start(self.log_dir)
        wait_before = float(self.engine.input_wait_seconds.numpy())
        graphs_before = self.engine.graphs
        started, cpu_started = time.perf_counter(), time.process_time()
        loss = float(self.engine.run(iterator, steps))
        seconds = time.perf_counter() - started
        cpu_seconds = time.process_time() - cpu_started
        waited = float(self.engine.input_wait_seconds.numpy()) - wait_before
        self.step += steps
        if profile and self.step == profile[1]:
            tf.profiler.experimental.stop()
        traced = self.engine.graphs > graphs_before
        self.times.add(seconds, steps, waited, cpu_seconds, traced=traced)
        return GraphCall(steps, seconds, waited, cpu_seconds, loss)

    def validation_due(self) -> bool:
        return self.step % self.validation_interval == 0 or self.step == self.plan.total_steps

    def validate(self, eval_data: tf.data.Dataset, phase: Phase) -> dict:
        """Scores the model on the eval split: its figures into TensorBoard (eval/ tags) and the
        validations; keeps them as the best when they are; decides early stopping."""
        started, cpu_started = time.perf_counter(), time.process_time()
        figures = self.engine.evaluate(eval_data)
        seconds, cpu_seconds = time.perf_counter() - started, time.process_time() - cpu_started
        record = {"step": self.step, "epoch": self.plan.epochs_at(self.step), **figures}
        # CPU seconds beside wall seconds: they hardly change when other work shares the cores.
        self.validations.append({**record, "seconds": seconds, "cpu_seconds": cpu_seconds})
        tf.summary.scalar("eval/loss", figures["loss"], step=self.step)
        tf.summary.scalar("eval/accuracy", figures["accuracy"], step=self.step)
        self.best.offer(self.step, figures, self.engine.model)
        self.stop_reason = self.early_stopping(phase)
        return figures

    def early_stopping(self, phase: Phase) -> str | None:
        """Why training stops here, or None: `patience` validations without improvement, in
        the last phase (an earlier phase only prepares the head)."""
        stopping = self.config.early_stopping
        if not stopping.patience or phase != self.plan.phases[-1]:
            return None
        stale = self.best.stale_validations(self.step, self.validation_interval)
        if stale < stopping.patience:
            return None
        best = self.plan.epochs_at(self.best.best_step)
        validations = "validation" if stale == 1 else "validations"
        return (
            f"early stopping: eval {stopping.metric} did not improve by more than "
            f"{stopping.min_delta:g} in {stale} {validations} after epoch {best:g}"
        )

    def checkpoint(self) -> None:
        self.checkpoints.maybe_save(self.step)

    def write_step_summaries(self, call: GraphCall) -> None:
        """The last graph call's loss, learning rate and speed, at the current step."""
        step = self.step
        tf.summary.scalar("train/step_loss", call.loss, step=step)
        tf.summary.scalar("train/learning_rate", float(self.schedule(step)), step=step)
        tf.summary.scalar("perf/step_time_seconds", call.seconds / call.steps, step=step)
        tf.summary.scalar("perf/images_per_second", self._rate(call), step=step)
        tf.summary.scalar("perf/input_wait_seconds", call.input_wait / call.steps, step=step)
        tf.summary.scalar("perf/step_cpu_seconds", call.cpu_seconds / call.steps, step=step)

    def end_epoch(self, phase: Phase, metrics: dict[str, float], figures: dict | None) -> dict:
        """The epoch's training metrics (and its validation's): into the history and
        TensorBoard; then a fresh count."""
        record = {"epoch": self.plan.epoch_of(self.step), **metrics, "phase": phase.name}
        if figures is not None:
            record.update(val_loss=figures["loss"], val_accuracy=figures["accuracy"])
        self.history.append(record)
        tf.summary.scalar("train/loss", record["loss"], step=self.step)
        tf.summary.scalar("train/accuracy", record["accuracy"], step=self.step)
        LOGGER.info("epoch %d/%d: %s", record["epoch"], self.plan.epochs, record)
        self.engine.reset_metrics()
        return record

    def report_progress(self, call: GraphCall, metrics: dict[str, float], figures: dict | None):
        """The console's progress line (the chief's): steps done by this process (a resumed
        run's rate), the epoch, speed, the running training metrics and the validation's."""
        if not self.chief:
            return
        if figures is not None:
            metrics = {**metrics, "val_loss": figures["loss"], "val_accuracy": figures["accuracy"]}
        progress.report(
            LOGGER,
            "training",
            done=self.step - self.start_step,
            total=self.plan.total_steps - self.start_step,
            seconds=time.perf_counter() - self._started,
            epoch=self.plan.epoch_of(self.step),
            epochs=self.plan.epochs,
            images_per_second=self._rate(call),
            **metrics,
        )

    def final_evaluation(self, eval_data: tf.data.Dataset) -> dict:
        """The eval split's figures of the model to export. With restore_best, the best
        validation's weights go back into the model first, and are scored again."""
        best = self.best.best_step
        if self.config.restore_best and best is not None and best != self.step:
            self.best.restore_weights(self.engine.model)
            self.exported_step = best
            return self.engine.evaluate(eval_data)
        self.exported_step = self.step
        last = self.validations[-1] if self.validations else None
        if last is not None and last["step"] == self.step:
            return {key: last[key] for key in ("loss", "accuracy", "examples")}
        return self.engine.evaluate(eval_data)  # a run resumed at its last step

    def outcome(self) -> dict:
        """Which epoch was exported and why, the best validation, and why training ended."""
        best = self.best.best_step
        return {
            "exported_epoch": self.plan.epochs_at(self.exported_step),
            "best_epoch": None if best is None else self.plan.epochs_at(best),
            "restored_best": self.exported_step != self.step,
            "stopped_early": self.stop_reason is not None,
            "stop_reason": self.stop_reason or "the schedule ended",
            "validations": self.validations,
            "validation_seconds": sum(record["seconds"] for record in self.validations),
        }

    def _rate(self, call: GraphCall) -> float:
        return call.steps * self.plan.step_batch / call.seconds


def steps_until_boundary(
    step: int, phase: Phase, steps_per_epoch: int, config: TrainerConfig
) -> int:
    """Steps in the next graph call: steps_per_execution, cut short at the end of an epoch and of
    the phase, at a checkpoint, at a validation, and at the start and end of the profiled range,
    so each happens on time."""
    boundaries = [phase.end_step, (step // steps_per_epoch + 1) * steps_per_epoch]
    if config.checkpoint_every_steps:
        every = config.checkpoint_every_steps
        boundaries.append((step // every + 1) * every)
    if config.profile_steps:
        boundaries += [config.profile_steps[0] - 1, config.profile_steps[1]]
    return min(config.steps_per_execution, *(b - step for b in boundaries if b > step))
