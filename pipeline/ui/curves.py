"""Training curves: the scalars the Trainer writes for TensorBoard (train/, eval/, perf/ tags),
read with TensorBoard's own event reader, put on an epoch axis and handed to the pages as data
that static/charts.js draws with the vendored uPlot (axes, ticks, hover values, drag to zoom)."""

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
EPOCH_TAG = "train/loss"  # written once at the end of every epoch, at the epoch's last step
ACCURACY_FLOOR_STEP = 0.05  # an accuracy axis starts at a multiple of this below the lowest value


@dataclasses.dataclass(frozen=True)
class Series:
    tag: str  # what the legend names: a scalar tag, or a run on Compare
    points: tuple[tuple[float, float], ...]  # (x, value), by x

    @property
    def last(self) -> float:
        return self.points[-1][1]


@dataclasses.dataclass(frozen=True)
class Chart:
    title: str
    x_label: str  # "epoch", "step" or "run"
    series: tuple[Series, ...]
    # The value axis' fixed (low, high), or None to fit the values: accuracies get a fixed top
    # of 1, so a 0.001 change between runs looks like one.
    value_range: tuple[float, float] | None = None
    x_names: tuple[str, ...] = ()  # what x = 0, 1, ... stand for (runs), shown on hover

    def data(self) -> dict:
        """What static/charts.js reads from the page."""
        return {
            "title": self.title,
            "x": self.x_label,
            "range": self.value_range,
            "names": list(self.x_names),
            "series": [
                {"label": s.tag, "points": [list(p) for p in s.points]} for s in self.series
            ],
        }


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


def in_epochs(scalars: dict[str, list[tuple[int, float]]]) -> tuple[dict, str]:
    """The scalars with x in epochs (step / steps per epoch) and the axis' name, so a
    warm-started run and a full run line up; in steps when no epoch ended. The steps per epoch
    are the greatest common divisor of the steps the per-epoch tag was written at (a resumed
    run's epochs still end at multiples of it)."""
    ends = [step for step, _ in scalars.get(EPOCH_TAG, []) if step > 0]
    if not ends:
        return scalars, "step"
    per_epoch = math.gcd(*ends)
    return {
        tag: [(step / per_epoch, value) for step, value in points]
        for tag, points in scalars.items()
    }, "epoch"


def _value_range(title: str, values: list[float]) -> tuple[float, float] | None:
    if "accuracy" not in title or not all(0 <= value <= 1 for value in values):
        return None
    low = math.floor((min(values) - ACCURACY_FLOOR_STEP / 2) / ACCURACY_FLOOR_STEP)
    return max(0.0, round(low * ACCURACY_FLOOR_STEP, 6)), 1.0


def chart(
    title: str,
    scalars: dict[str, list[tuple[float, float]]],
    tags,
    x_label: str = "step",
    x_names: tuple[str, ...] = (),
) -> Chart | None:
    """The chart of `tags` on shared axes; None when none of them has a finite value."""
    drawn = {
        tag: tuple((x, value) for x, value in scalars.get(tag, []) if math.isfinite(value))
        for tag in tags
    }
    series = tuple(Series(tag, points) for tag, points in drawn.items() if points)
    if not series:
        return None
    values = [value for s in series for _, value in s.points]
    return Chart(title, x_label, series, _value_range(title, values), x_names)


def training_charts(model_run_uri: str) -> list[Chart]:
    scalars, x_label = in_epochs(read_scalars(model_run_uri))
    found = (chart(title, scalars, tags, x_label) for title, tags in CHARTS)
    return [c for c in found if c is not None]
