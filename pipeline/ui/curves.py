"""Training curves: the scalars the Trainer writes for TensorBoard (train/, eval/, perf/ tags),
read with TensorBoard's own event reader and laid out as SVG polylines (no chart library)."""

from __future__ import annotations

import dataclasses
import math
import posixpath

# (chart title, the scalar tags drawn on it); tags the Trainer did not write are left out.
CHARTS = (
    ("loss", ("train/step_loss", "train/loss", "eval/loss")),
    ("accuracy", ("train/accuracy", "eval/accuracy")),
    ("learning rate", ("train/learning_rate",)),
    ("images per second", ("perf/images_per_second",)),
)
LOG_DIR = "logs"  # under the Trainer's model run folder (components/training/train.py)
WIDTH, HEIGHT, MARGIN = 360, 160, 8


@dataclasses.dataclass(frozen=True)
class Series:
    tag: str
    points: tuple[tuple[int, float], ...]  # (step, value), by step
    svg_points: str  # "x,y x,y ..." inside the chart's WIDTH x HEIGHT box

    @property
    def last(self) -> float:
        return self.points[-1][1]


@dataclasses.dataclass(frozen=True)
class Chart:
    title: str
    series: tuple[Series, ...]
    steps: tuple[int, int]  # first and last step drawn
    values: tuple[float, float]  # lowest and highest value drawn


def read_scalars(model_run_uri: str) -> dict[str, list[tuple[int, float]]]:
    """tag -> (step, value) for every scalar in the Trainer's event files, by step."""
    from tensorboard.backend.event_processing import event_accumulator
    from tensorboard.util import tensor_util

    log_dir = posixpath.join(model_run_uri, LOG_DIR)
    accumulator = event_accumulator.EventAccumulator(
        log_dir, size_guidance={event_accumulator.TENSORS: 0, event_accumulator.SCALARS: 0}
    )
    accumulator.Reload()
    scalars: dict[str, dict[int, float]] = {}
    tags = accumulator.Tags()
    for tag in tags.get(event_accumulator.TENSORS, []):
        for event in accumulator.Tensors(tag):
            value = tensor_util.make_ndarray(event.tensor_proto)
            if value.size == 1:
                scalars.setdefault(tag, {})[event.step] = float(value.reshape(()))
    for tag in tags.get(event_accumulator.SCALARS, []):
        for event in accumulator.Scalars(tag):
            scalars.setdefault(tag, {})[event.step] = float(event.value)
    return {tag: sorted(by_step.items()) for tag, by_step in sorted(scalars.items())}


def _scale(value: float, low: float, high: float, size: int) -> float:
    span = high - low
    return MARGIN + (size - 2 * MARGIN) * ((value - low) / span if span else 0.5)


def chart(title: str, scalars: dict[str, list[tuple[int, float]]], tags) -> Chart | None:
    """The chart of `tags` on shared axes; None when none of them has a finite value."""
    drawn = {
        tag: [(step, value) for step, value in scalars.get(tag, []) if math.isfinite(value)]
        for tag in tags
    }
    drawn = {tag: points for tag, points in drawn.items() if points}
    if not drawn:
        return None
    steps = [step for points in drawn.values() for step, _ in points]
    values = [value for points in drawn.values() for _, value in points]
    first, last, low, high = min(steps), max(steps), min(values), max(values)
    series = tuple(
        Series(
            tag,
            tuple(points),
            " ".join(
                f"{_scale(step, first, last, WIDTH):.1f},"
                f"{HEIGHT - _scale(value, low, high, HEIGHT):.1f}"
                for step, value in points
            ),
        )
        for tag, points in drawn.items()
    )
    return Chart(title, series, (first, last), (low, high))


def training_charts(model_run_uri: str) -> list[Chart]:
    scalars = read_scalars(model_run_uri)
    return [c for title, tags in CHARTS if (c := chart(title, scalars, tags)) is not None]
