"""What every benchmark chart shares."""

from __future__ import annotations


def label_bars(axis, bars, labels: list[str]) -> None:
    """Writes each bar's label (its value, and its ratio where it has one) just above it."""
    for bar, label in zip(bars, labels, strict=True):
        axis.annotate(
            label,
            (bar.get_x() + bar.get_width() / 2, bar.get_height()),
            ha="center",
            va="bottom",
            fontsize=8,
        )


def value_and_ratio(record: dict) -> str:
    """A result record's value (whole above 100, else 3 significant digits) and its ratio to its
    baseline, where it has one."""
    value = record["value"]
    label = f"{value:.0f}" if value >= 100 else f"{value:.3g}"
    if "ratio" in record:
        label += f"\n{record['ratio']:.2f}x"
    return label
