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


def share_bars(shares: list[dict], prefix: str, title: str, path: str, width: float = 7) -> None:
    """A bar per record of a share or accuracy between 0 and 1, named without `prefix`."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axis = plt.subplots(figsize=(width, 4))
    names = [r["name"].removeprefix(prefix) for r in shares]
    bars = axis.bar(names, [r["value"] for r in shares], color="#4a7ab5")
    label_bars(axis, bars, [f"{r['value']:.3f}" for r in shares])
    axis.set_ylim(0, 1.1)
    if len(shares) > 6:
        axis.tick_params(axis="x", labelsize=7, rotation=30)
    axis.set_title(title)
    figure.tight_layout()
    figure.savefig(path, dpi=110)
    plt.close(figure)
