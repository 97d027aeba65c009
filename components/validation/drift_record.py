"""What the data gate measured of image size and brightness drift, as the DataVerdict records it
and the run summary shows it: each distance (a share of images moved) against its threshold, and
the classes it was measured on. No TensorFlow here: `imgpipe runs` reads these back."""

from __future__ import annotations

import dataclasses

METRIC = "L-infinity distance between the CDFs (share of images moved)"


@dataclasses.dataclass(frozen=True)
class Distance:
    """One measured distance against its threshold."""

    feature: str
    distance: float
    threshold: float

    @property
    def passed(self) -> bool:
        return self.distance <= self.threshold

    def describe(self) -> str:
        verdict = "pass" if self.passed else "stop"
        return f"{self.feature} {self.distance:.3f} (threshold {self.threshold:g}): {verdict}"


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
