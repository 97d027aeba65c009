"""The performance report of a training run: how fast it trained and under which settings.

Stored as JSON beside the model and recorded in ML Metadata (as custom properties of the Model
artifact), so runs can be compared. Steady-state figures leave out each graph's first call,
which includes tracing (and XLA compilation); a run too short to have any other call reports
all its calls, and says so (steady_state False), rather than NaN.
Wall-clock figures slow down whenever other processes share the cores; the CPU seconds per step
hardly do, so two reports with the same CPU per step and different step times were taken on a
busier machine, not made slower by the code.
"""

from __future__ import annotations

import dataclasses
import json

import tensorflow as tf

REPORT_FILE = "performance_report.json"


@dataclasses.dataclass
class StepTimes:
    """Accumulates wall time, steps, input wait and process CPU time of the graph calls that
    did not trace."""

    seconds: float = 0.0
    steps: int = 0
    input_wait_seconds: float = 0.0
    cpu_seconds: float = 0.0
    first_call_seconds: float | None = None
    # Every call, traced ones included: the figures of a run too short for a steady state.
    all_seconds: float = 0.0
    all_steps: int = 0
    all_input_wait_seconds: float = 0.0
    all_cpu_seconds: float = 0.0

    def add(
        self,
        seconds: float,
        steps: int,
        input_wait_seconds: float,
        cpu_seconds: float,
        traced: bool = False,
    ) -> None:
        """`cpu_seconds`: this process's CPU time during the call (every thread, the input
        pipeline's included). `traced`: the call made a new graph (a fine-tuning phase's first
        call); the very first call always counts as one."""
        self.all_seconds += seconds
        self.all_steps += steps
        self.all_input_wait_seconds += input_wait_seconds
        self.all_cpu_seconds += cpu_seconds
        if self.first_call_seconds is None:
            self.first_call_seconds = seconds
            return
        if traced:
            return
        self.seconds += seconds
        self.steps += steps
        self.input_wait_seconds += input_wait_seconds
        self.cpu_seconds += cpu_seconds


@dataclasses.dataclass(frozen=True)
class PerformanceReport:
    images_per_second: float  # steady state, all replicas and workers together
    step_time_seconds: float  # one optimizer step, steady state
    input_wait_share: float  # of steady-state wall time spent waiting for the next batch
    # This process's CPU seconds (all threads) per optimizer step, steady state: unlike the step
    # time, it hardly grows when other processes share the cores.
    step_cpu_seconds: float
    first_call_seconds: float  # the first graph call: tracing, XLA compilation, its steps
    measured_steps: int  # optimizer steps behind the steady-state figures
    # False when every graph call traced (a run of one call per graph): the figures above then
    # cover all calls, tracing and compilation included, instead of being undefined.
    steady_state: bool
    traces: int  # of the training loop; one per graph means no retrace
    graphs: int  # one per set of trainable variables: 2 for a fine-tuning run with a frozen phase
    retraces: int
    precision: str
    xla: bool
    replicas: int
    workers: int
    devices: list[str]
    global_batch_size: int  # examples per optimizer step, accumulation included
    gradient_accumulation_steps: int
    steps_per_execution: int

    @classmethod
    def from_times(
        cls, times: StepTimes, traces: int, global_batch_size: int, graphs: int = 1, **settings
    ):
        steady = times.steps > 0
        seconds, steps, wait, cpu = (
            (times.seconds, times.steps, times.input_wait_seconds, times.cpu_seconds)
            if steady
            else (
                times.all_seconds,
                times.all_steps,
                times.all_input_wait_seconds,
                times.all_cpu_seconds,
            )
        )
        return cls(
            images_per_second=steps * global_batch_size / seconds if seconds else 0.0,
            step_time_seconds=seconds / steps if steps else 0.0,
            input_wait_share=wait / seconds if seconds else 0.0,
            step_cpu_seconds=cpu / steps if steps else 0.0,
            steady_state=steady,
            first_call_seconds=times.first_call_seconds or 0.0,
            measured_steps=times.steps,
            traces=traces,
            graphs=graphs,
            retraces=max(traces - graphs, 0),
            global_batch_size=global_batch_size,
            **settings,
        )

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)


def write_report(report: dict, directory: str) -> str:
    """Writes directory/performance_report.json; returns its path."""
    path = f"{directory.rstrip('/')}/{REPORT_FILE}"
    tf.io.gfile.makedirs(directory)
    with tf.io.gfile.GFile(path, "w") as handle:
        handle.write(json.dumps(report, indent=2, sort_keys=True))
    return path


def read_report(directory: str) -> dict | None:
    """The report stored in `directory`, or None when there is none."""
    path = f"{directory.rstrip('/')}/{REPORT_FILE}"
    if not tf.io.gfile.exists(path):
        return None
    with tf.io.gfile.GFile(path) as handle:
        return json.load(handle)
