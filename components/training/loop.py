"""The training loop, in the shape of TensorFlow Model Garden's base trainer on Orbit's
StandardTrainer: a short `run()` that calls named steps, each of which can be tested alone.

    while steps remain:
        change_phase()           which layers train (a fine-tuning schedule's frozen phase)
        train_steps(n)           one graph call of n optimizer steps, timed
        checkpoint()             every checkpoint_every_steps
        write_step_summaries()   TensorBoard: loss, learning rate, speed
        end_epoch()              at an epoch's end: its training metrics, into the history
        report_progress()        the console's progress line

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
        schedule: keras.optimizers.schedules.LearningRateSchedule,
        log_dir: str,
        start_step: int,
    ):
        """`start_step`: the step `checkpoints` restored (0 for a fresh run)."""
        self.config = config
        self.plan = plan
        self.engine = engine
        self.checkpoints = checkpoints
        self.schedule = schedule
        self.log_dir = log_dir
        self.chief = engine.strategy.extended.should_checkpoint
        self.start_step = self.step = start_step
        self.times = StepTimes()
        self.history: list[dict] = []  # one record per epoch ended
        self.train_seconds = 0.0
        self._started = 0.0

    def run(self, iterator) -> None:
        """Trains until the plan's last step; `iterator` yields the distributed training
        batches."""
        self._started = time.perf_counter()
        while self.step < self.plan.total_steps:
            phase = self.change_phase()
            steps = self.steps_until_boundary(phase)
            call = self.train_steps(iterator, steps)
            self.checkpoint()
            self.write_step_summaries(call)
            # Every worker reads the metrics: under MultiWorkerMirroredStrategy a read is a
            # collective, and a read by the chief alone waits for the others for ever.
            metrics = self.engine.training_metrics()
            if self.step % self.plan.steps_per_epoch == 0:
                self.end_epoch(phase, metrics)
            self.report_progress(call, metrics)
        self.train_seconds = time.perf_counter() - self._started

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

    def end_epoch(self, phase: Phase, metrics: dict[str, float]) -> dict:
        """The epoch's training metrics: into the history and TensorBoard; then a fresh count."""
        record = {"epoch": self.plan.epoch_of(self.step), **metrics, "phase": phase.name}
        self.history.append(record)
        tf.summary.scalar("train/loss", record["loss"], step=self.step)
        tf.summary.scalar("train/accuracy", record["accuracy"], step=self.step)
        LOGGER.info("epoch %d/%d: %s", record["epoch"], self.plan.epochs, record)
        self.engine.reset_metrics()
        return record

    def report_progress(self, call: GraphCall, metrics: dict[str, float]) -> None:
        """The console's progress line (the chief's): steps done by this process (a resumed
        run's rate), the epoch, speed and the running training metrics."""
        if not self.chief:
            return
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

    def _rate(self, call: GraphCall) -> float:
        return call.steps * self.plan.step_batch / call.seconds


def steps_until_boundary(
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
