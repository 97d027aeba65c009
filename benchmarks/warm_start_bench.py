"""Retraining on a new span: warm-started from the last span's model vs from scratch.

Span 1 is the embedded default dataset (300 images per class); span 2 is the same generator's
330 per class (10% more images; its first 300 per class are span 1's, as in a folder that grew),
each ingested with default settings (the split hashes each image, so span 1's eval images stay
in span 2's eval split and no model trains on them). Span 1's model is trained from scratch with
the default TrainerConfig (30 epochs); on span 2, a model from scratch with the same settings
is set side by side with warm starts from span 1's exported model (the Trainer's base_model path:
warm_start_epochs at fine_tune_learning_rate) of WARM_START_EPOCHS epochs, all evaluated on span
2's eval split. The answer: the wall time of the shortest warm start that reaches the scratch
model's eval accuracy, against the scratch model's wall time. One process, one run, one seed.

Settings (environment): BENCH_WARM_START_EPOCHS (default "2 5 10"), and the trainer's
BENCH_TRAINER_EPOCHS and BENCH_TRAINER_IMAGES_PER_CLASS (span 1's; span 2 holds 10% more).
"""

from __future__ import annotations

import os
import tempfile

import components  # noqa: F401  (sets TF_USE_LEGACY_KERAS before TensorFlow loads)
from benchmarks.charts import label_bars

TITLE = "Warm start on a new span against training from scratch"
SPAN_1_IMAGES_PER_CLASS = 300
# 5 is TrainerConfig's default
WARM_START_EPOCHS = tuple(
    int(epochs) for epochs in os.environ.get("BENCH_WARM_START_EPOCHS", "2 5 10").split()
)


def run(output_dir: str) -> list[dict]:
    from benchmarks.input_data import default_dataset_splits
    from benchmarks.regularization_bench import default_config, images_per_class, timed_train

    span_1_per_class = images_per_class(SPAN_1_IMAGES_PER_CLASS)
    span_1 = default_dataset_splits(output_dir, span_1_per_class)
    span_2 = default_dataset_splits(output_dir, round(span_1_per_class * 1.1))
    records = []
    with tempfile.TemporaryDirectory(prefix="warm-start-") as directory:
        first = timed_train(default_config(), *span_1, os.path.join(directory, "span_1"))
        records.append(_record("span_1.scratch", first))
        scratch = timed_train(default_config(), *span_2, os.path.join(directory, "scratch"))
        records.append(_record("span_2.scratch", scratch))
        for epochs in WARM_START_EPOCHS:
            warm = timed_train(
                default_config(warm_start=True, warm_start_epochs=epochs),
                *span_2,
                os.path.join(directory, f"warm_{epochs}"),
                base_model_dir=first["serving_model_dir"],
            )
            record = _record(f"span_2.warm_start_{epochs}_epochs", warm)
            record["reaches_scratch_accuracy"] = warm["eval_accuracy"] >= scratch["eval_accuracy"]
            record["seconds_ratio_to_scratch"] = warm["wall_seconds"] / scratch["wall_seconds"]
            record["ratio"] = warm["eval_accuracy"] / scratch["eval_accuracy"]
            record["baseline"] = "warm_start.span_2.scratch"
            records.append(record)
    reaching = [r for r in records if r.get("reaches_scratch_accuracy")]
    summary = {
        "name": "warm_start.span_2.seconds_to_scratch_accuracy",
        "unit": "seconds",
        "target_accuracy": scratch["eval_accuracy"],
        "scratch_seconds": scratch["wall_seconds"],
    }
    if reaching:
        fastest = min(reaching, key=lambda r: r["wall_seconds"])
        summary |= {
            "value": fastest["wall_seconds"],
            "warm_start_epochs": fastest["epochs"],
            "ratio": fastest["wall_seconds"] / scratch["wall_seconds"],
            "baseline": "warm_start.span_2.scratch",
        }
    else:  # no warm start reached it: the value is the scratch run's own time
        summary |= {"value": scratch["wall_seconds"], "warm_start_epochs": None}
    records.append(summary)
    for record in records:
        if "setting" in record:
            print(
                f"warm start {record['setting']:<28} eval accuracy {record['value']:.3f}  "
                f"{record['wall_seconds']:.0f} s",
                flush=True,
            )
    return records


def _record(setting: str, metrics: dict) -> dict:
    return {
        "name": f"warm_start.{setting}.eval_accuracy",
        "value": metrics["eval_accuracy"],
        "unit": "accuracy",
        "setting": setting,
        "wall_seconds": metrics["wall_seconds"],
        "train_seconds": metrics["train_seconds"],
        "epochs": metrics["epochs"],
        "phases": metrics["phases"],
        "train_function_traces": metrics["train_function_traces"],
    }


def chart(records: list[dict], path: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    runs = [r for r in records if "setting" in r]
    names = [r["setting"].replace("span_2.", "").replace("_epochs", " ep") for r in runs]
    figure, axes = plt.subplots(1, 2, figsize=(12, 4))
    for axis, key, fmt, title in (
        (axes[0], "value", "{:.3f}", "eval accuracy (span 1: its eval split; the rest: span 2's)"),
        (axes[1], "wall_seconds", "{:.0f}", "wall time of the train() call, s"),
    ):
        bars = axis.bar(names, [r[key] for r in runs], color="#4a7ab5")
        label_bars(axis, bars, [fmt.format(r[key]) for r in runs])
        axis.set_title(title, fontsize=10)
        axis.tick_params(axis="x", labelsize=8)
    figure.suptitle("span 2 (10% more images): warm start from span 1's model vs scratch")
    figure.tight_layout()
    figure.savefig(path, dpi=110)
    plt.close(figure)


def headline(records: list[dict]) -> list[tuple[str, str]]:
    summary = next(r for r in records if r["name"].endswith(".seconds_to_scratch_accuracy"))
    if summary.get("warm_start_epochs") is None:
        answer = (
            f"no warm start reached the scratch model's accuracy ({summary['target_accuracy']:.3f})"
        )
    else:
        answer = (
            f"the scratch model's accuracy in {summary['ratio']:.2f}x its time "
            f"({summary['warm_start_epochs']} epochs, {summary['value']:.0f} s)"
        )
    return [("Retraining on a new span, warm-started from the last model", answer)]


def meaning(records: list[dict]) -> list[str]:
    runs = [r for r in records if "setting" in r]
    return [
        "Eval accuracy and wall time: "
        + ", ".join(
            f"{r['setting'].replace('_', ' ')} {r['value']:.3f} in {r['wall_seconds']:.0f} s"
            for r in runs
        )
        + ".",
    ]
