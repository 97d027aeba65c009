"""The eval images a no-regression comparison was made on, against the baseline's own.

TFX's Evaluator scores the candidate and the baseline model on this span's eval split, so the
two are compared on the same images; but the baseline was blessed on its own span's eval split.
Images keep their split across spans, so the two eval sets differ only by images removed and
added (or by splits a manifest fixed otherwise). This counts the difference from the two spans'
source indexes, by sha256, and how many of the eval images the baseline trained on (a
comparison on those favours the baseline).
"""

from __future__ import annotations

import dataclasses

EVAL, TRAIN = "eval", "train"


@dataclasses.dataclass(frozen=True)
class EvalOverlap:
    """Attributes:
    compared: the eval images this run compared the candidate and the baseline on.
    kept: of those, the ones in the baseline's eval split too.
    gone: the baseline's eval images not in this eval split (removed, or now in another split).
    trained_on: the eval images that were in the baseline's train split.
    """

    compared: int
    kept: int
    gone: int
    trained_on: int

    @property
    def new(self) -> int:
        """The eval images the baseline's eval split did not hold."""
        return self.compared - self.kept

    @property
    def changed(self) -> bool:
        return bool(self.gone or self.new or self.trained_on)

    def describe(self) -> str:
        """One line: the images compared on and what changed since the baseline's eval set."""
        head = f"no-regression compared on {self.compared} eval images"
        if not self.changed:
            return f"{head}, the baseline's own"
        line = f"{head}: {self.gone} of the baseline's are gone, {self.new} new"
        if self.trained_on:
            line += f", {self.trained_on} of them the baseline trained on"
        return line


def eval_overlap(current: list[dict], baseline: list[dict]) -> EvalOverlap:
    """From two source indexes' rows (sha256 and split of each accepted image): this span's and
    the baseline model's training data's."""

    def of_split(rows: list[dict], split: str) -> set[str]:
        return {row["sha256"] for row in rows if row["split"] == split}

    compared, before = of_split(current, EVAL), of_split(baseline, EVAL)
    return EvalOverlap(
        compared=len(compared),
        kept=len(compared & before),
        gone=len(before - compared),
        trained_on=len(compared & of_split(baseline, TRAIN)),
    )
