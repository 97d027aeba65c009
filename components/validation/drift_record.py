"""What the data gate measured of image size and brightness drift, as the DataVerdict records it
and the run summary shows it: each distance (a share of images moved) against its threshold, and
the classes it was measured on. No TensorFlow here: `imgpipe runs` reads these back."""

from __future__ import annotations

import dataclasses
import math

METRIC = "L-infinity distance between the CDFs (share of images moved)"
# Two samples of one distribution differ by more than noise_floor() with probability 0.001
# (Kolmogorov-Smirnov's asymptotic critical value): 30 images against 30 move about 0.23 of
# them by chance as often as not, so on small spans the floor, not the threshold, decides.
NOISE_SIGNIFICANCE = 0.001


def noise_floor(images: int, baseline_images: int) -> float:
    """The share of images two samples of these sizes from one distribution move by chance at
    NOISE_SIGNIFICANCE; 0 when either size is unknown."""
    if images <= 0 or baseline_images <= 0:
        return 0.0
    critical = math.sqrt(-math.log(NOISE_SIGNIFICANCE / 2) / 2)
    return round(critical * math.sqrt((images + baseline_images) / (images * baseline_images)), 6)


@dataclasses.dataclass(frozen=True)
class Distance:
    """One measured distance against its threshold, over images of the span against
    baseline_images of the baseline data (0: not known, no noise floor). A distance stops the
    span only above both its threshold and the noise floor of those sample sizes."""

    feature: str
    distance: float
    threshold: float
    images: int = 0
    baseline_images: int = 0

    @classmethod
    def from_record(cls, record: dict) -> Distance:
        """The distance a DataVerdict recorded (records before the sample sizes have none)."""
        names = {field.name for field in dataclasses.fields(cls)}
        return cls(**{key: value for key, value in record.items() if key in names})

    def record(self) -> dict:
        """What the DataVerdict records: the fields, the noise floor and the verdict."""
        return dataclasses.asdict(self) | {"floor": self.floor, "passed": self.passed}

    @property
    def floor(self) -> float:
        return noise_floor(self.images, self.baseline_images)

    @property
    def passed(self) -> bool:
        return self.distance <= max(self.threshold, self.floor)

    def describe(self) -> str:
        verdict = "pass" if self.passed else "stop"
        floor = (
            f", noise floor {self.floor:.2f} at {self.images} and {self.baseline_images} images"
            if self.floor > self.threshold
            else ""
        )
        measured = f"{self.feature} {self.distance:.3f}"
        return f"{measured} (threshold {self.threshold:g}{floor}): {verdict}"


@dataclasses.dataclass(frozen=True)
class ClassScope:
    """The classes the distances were measured on: those the span shares with the baseline data,
    leaving out its new classes and the baseline's gone ones (the class policy decides on those);
    or the whole split, and why, where the baseline data's counts are not per class."""

    shared: tuple[str, ...] = ()
    new: tuple[str, ...] = ()
    gone: tuple[str, ...] = ()
    whole_split: str = ""  # why the whole split was compared; "" when compared per class

    def describe(self) -> str:
        if self.whole_split:
            return f"on the whole split, image sizes only ({self.whole_split})"
        parts = [f"on {_classes(len(self.shared), 'shared')}"]
        parts += [
            f"{_classes(len(names), kind)} not compared"
            for kind, names in (("new", self.new), ("gone", self.gone))
            if names
        ]
        return "; ".join(parts)


def _classes(count: int, kind: str) -> str:
    return f"{count} {kind} class{'' if count == 1 else 'es'}"
