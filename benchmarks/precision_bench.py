"""float32 vs mixed_bfloat16 on the embedded default dataset: does bfloat16 keep the accuracy?

The default TrainerConfig (small_cnn, 64x64, 30 epochs; under XLA where bfloat16 is emulated)
trained on the default dataset's train split and scored on its eval split, once per precision and
seed, the same seeds for both, side by side in one process; each is one train() call, timed
around it. Reports eval accuracy per seed, its mean per precision and the difference
(mixed_bfloat16 minus float32, in points), and the training steps/s (the performance report's
steady state). Whether this CPU computes bfloat16 natively (runtime.cpu_has_native_bfloat16) is in
every record: where it does not, bfloat16 is emulated, so its steps/s say nothing about its
speed, but its accuracy is the number format's.

Settings (environment): BENCH_PRECISION_SEEDS (default "0 1 2"), and the trainer's
BENCH_TRAINER_EPOCHS and BENCH_TRAINER_IMAGES_PER_CLASS (benchmarks/regularization_bench.py).
"""

from __future__ import annotations

import os
import statistics
import tempfile

import components  # noqa: F401  (sets TF_USE_LEGACY_KERAS before TensorFlow loads)
from benchmarks.charts import label_bars

TITLE = "float32 against mixed_bfloat16"
PRECISIONS = ("float32", "mixed_bfloat16")
COLORS = ("#4a7ab5", "#d08a3a")  # of PRECISIONS in the chart
BASELINE = "float32"
SEEDS = tuple(int(seed) for seed in os.environ.get("BENCH_PRECISION_SEEDS", "0 1 2").split())
# Where bfloat16 is emulated (Eigen), a mixed_bfloat16 step takes many times float32's: 30 epochs
# x 3 seeds would take hours. There mixed_bfloat16 trains under XLA (jit_compile), whose CPU
# backend computes each bfloat16 op in float32 and rounds its result to bfloat16, the numbers a
# native bfloat16 unit gives (float32 accumulation), at about XLA's float32 speed. float32 trains
# as its default does.
EMULATED_BFLOAT16_CHANGES = {"jit_compile": True}


def _changes(precision: str, native: bool) -> dict:
    return EMULATED_BFLOAT16_CHANGES if precision != BASELINE and not native else {}


def run(output_dir: str) -> list[dict]:
    from benchmarks.input_data import default_dataset_splits
    from benchmarks.regularization_bench import default_config, images_per_class, timed_train
    from components.training.runtime import cpu_has_native_bfloat16

    native = cpu_has_native_bfloat16()
    if not native:
        print("precision: this CPU emulates bfloat16; mixed_bfloat16 trains under XLA", flush=True)
    train_files, eval_files = default_dataset_splits(output_dir, images_per_class())
    runs = {precision: [] for precision in PRECISIONS}
    records = []
    with tempfile.TemporaryDirectory(prefix="precision-") as directory:
        for seed in SEEDS:  # seed-major: a drift in the machine's load hits both precisions
            for precision in PRECISIONS:
                changes = _changes(precision, native)
                config = default_config(precision=precision, seed=seed, **changes)
                workdir = os.path.join(directory, f"{precision}-{seed}")
                metrics = timed_train(config, train_files, eval_files, workdir)
                performance = metrics["performance"]
                record = {
                    "name": f"precision.{precision}.seed_{seed}.eval_accuracy",
                    "value": metrics["eval_accuracy"],
                    "unit": "accuracy",
                    "precision": precision,
                    "seed": seed,
                    "steps_per_second": 1.0 / performance["step_time_seconds"],
                    "eval_loss": metrics["eval_loss"],
                    "train_accuracy": metrics["train_accuracy"],
                    "wall_seconds": metrics["wall_seconds"],
                    "epochs": metrics["epochs"],
                    "jit_compile": config.jit_compile,
                    "train_function_traces": metrics["train_function_traces"],
                    "policy_in_report": performance["precision"],
                    "native_bfloat16": native,
                }
                print(
                    f"precision {precision:<15} seed {seed}  eval accuracy "
                    f"{metrics['eval_accuracy']:.4f}  {record['steps_per_second']:.2f} steps/s  "
                    f"{metrics['wall_seconds']:.0f} s",
                    flush=True,
                )
                runs[precision].append(record)
                records.append(record)
    return records + summary(runs, native)


def summary(runs: dict[str, list[dict]], native: bool) -> list[dict]:
    """Per precision: mean eval accuracy and mean steps/s (ratios to float32's); then the
    accuracy difference in points."""
    means = {}
    for precision, seeded in runs.items():
        accuracies = [r["value"] for r in seeded]
        means[precision] = {
            "accuracy": statistics.mean(accuracies),
            "steps_per_second": statistics.mean(r["steps_per_second"] for r in seeded),
            "spread": max(accuracies) - min(accuracies),
        }
    records = []
    base = means[BASELINE]
    for precision, mean in means.items():
        for figure, unit in (("accuracy", "accuracy"), ("steps_per_second", "steps/s")):
            record = {
                "name": f"precision.{precision}.mean_{figure}",
                "value": mean[figure],
                "unit": unit,
                "precision": precision,
                "seeds": len(runs[precision]),
                "epochs": runs[precision][0]["epochs"],
                "native_bfloat16": native,
            }
            if precision != BASELINE:
                record["ratio"] = mean[figure] / base[figure]
                record["baseline"] = f"precision.{BASELINE}.mean_{figure}"
            if figure == "accuracy":
                record["seed_spread_points"] = 100 * mean["spread"]
            records.append(record)
    difference = 100 * (means["mixed_bfloat16"]["accuracy"] - base["accuracy"])
    records.append(
        {
            "name": "precision.mixed_bfloat16_minus_float32",
            "value": difference,
            "unit": "points",
            "seeds": len(runs[BASELINE]),
            "epochs": runs[BASELINE][0]["epochs"],
            "native_bfloat16": native,
        }
    )
    print(
        f"precision: mixed_bfloat16 - float32 = {difference:+.2f} points of eval accuracy over "
        f"{len(runs[BASELINE])} seeds; native bfloat16 on this CPU: {native}",
        flush=True,
    )
    return records


def chart(records: list[dict], path: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    seeded = [r for r in records if "seed" in r]
    seeds = sorted({r["seed"] for r in seeded})
    width = 0.8 / len(PRECISIONS)
    figure, axes = plt.subplots(1, 2, figsize=(11, 4))
    for offset, (precision, color) in enumerate(zip(PRECISIONS, COLORS, strict=True)):
        mine = {r["seed"]: r for r in seeded if r["precision"] == precision}
        positions = [index + offset * width for index in range(len(seeds))]
        for axis, figure_name, shown in (
            (axes[0], "value", "{:.3f}"),
            (axes[1], "steps_per_second", "{:.2f}"),
        ):
            values = [mine[seed][figure_name] for seed in seeds]
            bars = axis.bar(positions, values, width, color=color, label=precision)
            label_bars(axis, bars, [shown.format(value) for value in values])
    for axis, title in zip(axes, ("eval accuracy", "training steps/s (steady state)"), strict=True):
        axis.set_xticks([index + width / 2 for index in range(len(seeds))])
        axis.set_xticklabels([f"seed {seed}" for seed in seeds])
        axis.set_title(title)
        axis.legend(fontsize=8, loc="upper right")
        axis.margins(y=0.25)  # room for the legend above the bars
    if seeded:  # differences of a point or two: the accuracy axis starts near the lowest bar
        axes[0].set_ylim(max(0.0, min(r["value"] for r in seeded) - 0.1), 1.02)
    native = seeded[0]["native_bfloat16"] if seeded else False
    figure.suptitle(
        "default trainer on the embedded dataset, float32 vs mixed_bfloat16 "
        f"(native bfloat16: {native}; machine shared)"
    )
    figure.tight_layout()
    figure.savefig(path, dpi=110)
    plt.close(figure)


def headline(records: list[dict]) -> list[tuple[str, str]]:
    difference = next(r for r in records if r["name"] == "precision.mixed_bfloat16_minus_float32")
    emulated = "" if difference["native_bfloat16"] else "; bfloat16 emulated on this CPU"
    return [
        (
            "mixed_bfloat16 against float32, eval accuracy",
            f"{difference['value']:+.2f} points over {difference['seeds']} seeds{emulated}",
        )
    ]


def meaning(records: list[dict]) -> list[str]:
    means = {r["name"]: r for r in records if ".mean_" in r["name"]}
    base = means[f"precision.{BASELINE}.mean_accuracy"]
    bf16 = means["precision.mixed_bfloat16.mean_accuracy"]
    speed = means["precision.mixed_bfloat16.mean_steps_per_second"]
    native = bf16["native_bfloat16"]
    return [
        f"Mean eval accuracy over {bf16['seeds']} seeds: float32 {base['value']:.3f} (seeds "
        f"{base['seed_spread_points']:.1f} points apart), mixed_bfloat16 {bf16['value']:.3f}.",
        f"mixed_bfloat16 trains at {speed['ratio']:.2f}x float32's steps/s"
        + ("." if native else ", emulated under XLA here: that says nothing of its speed."),
    ]
