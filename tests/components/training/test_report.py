"""The performance report's arithmetic: steady-state figures, and finite ones for runs too
short to have a steady state; the CPU per step beside the wall-clock step time."""

import math

from components.training.report import PerformanceReport, StepTimes

SETTINGS = dict(
    precision="float32",
    xla=False,
    replicas=1,
    workers=1,
    devices=["CPU:0"],
    gradient_accumulation_steps=1,
    steps_per_execution=2,
)


def test_steady_state_leaves_out_the_first_call():
    times = StepTimes()
    times.add(10.0, 2, 0.0, 9.0)  # traces
    times.add(1.0, 2, 0.25, 1.5)
    times.add(1.0, 2, 0.25, 0.5)
    report = PerformanceReport.from_times(times, traces=1, global_batch_size=8, **SETTINGS)
    assert report.steady_state and report.measured_steps == 4
    assert report.images_per_second == 4 * 8 / 2.0
    assert report.step_time_seconds == 0.5 and report.input_wait_share == 0.25
    assert report.step_cpu_seconds == (1.5 + 0.5) / 4


def test_a_single_call_reports_that_call_not_nan():
    times = StepTimes()
    times.add(4.0, 2, 1.0, 3.0)
    report = PerformanceReport.from_times(times, traces=1, global_batch_size=8, **SETTINGS)
    assert not report.steady_state
    assert report.images_per_second == 2 * 8 / 4.0
    assert report.step_time_seconds == 2.0 and report.input_wait_share == 0.25
    assert report.step_cpu_seconds == 1.5
    empty = PerformanceReport.from_times(StepTimes(), traces=0, global_batch_size=8, **SETTINGS)
    values = [
        empty.images_per_second,
        empty.step_time_seconds,
        empty.input_wait_share,
        empty.step_cpu_seconds,
    ]
    assert not any(math.isnan(value) for value in values)
