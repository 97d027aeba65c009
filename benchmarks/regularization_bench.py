"""Label smoothing, MixUp and CutMix on the embedded default dataset: do they pay?

Four trainings of the default TrainerConfig (small_cnn, 64x64, 30 epochs) on the default dataset's
train split, evaluated on its eval split, differing only in one regularization switch: off, label
smoothing 0.1, MixUp (alpha 0.2), CutMix (alpha 1.0), the values their papers use on ImageNet. Same
seed, same data, one process, side by side; each is one train() call, timed around it. One seed
each (a run is minutes here): differences of a point or two are within seed noise.
"""

from __future__ import annotations

import dataclasses
import os
import tempfile
import time

import components  # noqa: F401  (sets TF_USE_LEGACY_KERAS before TensorFlow loads)
from benchmarks.charts import label_bars, value_and_ratio

TITLE = "Label smoothing, MixUp and CutMix"
# setting -> TrainerConfig changes over the defaults
SETTINGS = {
    "off": {},
    "label_smoothing_0.1": {"label_smoothing": 0.1},
    "mixup_0.2": {"mixup_alpha": 0.2},
    "cutmix_1.0": {"cutmix_alpha": 1.0},
}
BASELINE = "off"
EPOCHS = os.environ.get("BENCH_TRAINER_EPOCHS")
IMAGES_PER_CLASS = os.environ.get("BENCH_TRAINER_IMAGES_PER_CLASS")


def default_config(**changes):
    """The default trainer, quiet and without checkpoints (they only cost time here)."""
    from components.training.trainer_config import TrainerConfig

    base = TrainerConfig(checkpoint_every_steps=0, report_input_pipeline=False)
    if EPOCHS:  # exactly these epochs: no warmup past them, no step floor stretching them
        epochs = int(EPOCHS)
        warmup = min(base.warmup_epochs, epochs - 1)
        base = dataclasses.replace(base, epochs=epochs, warmup_epochs=warmup, min_phase_steps=0)
    return dataclasses.replace(base, **changes).validate()


def timed_train(config, train_files, eval_files, output_dir: str, **options) -> dict:
    """train() on the default dataset's classes, with its train split's statistics; adds
    wall_seconds, measured around the call."""
    from components.training.input_pipeline import resolve_files
    from components.training.preprocessing import compute_normalization
    from components.training.train import train
    from data_prep.default_dataset import CLASS_NAMES

    normalization = compute_normalization(resolve_files(train_files), config.image_size)
    started = time.perf_counter()
    metrics = train(
        config, train_files, eval_files, list(CLASS_NAMES), normalization, output_dir, **options
    )
    metrics["wall_seconds"] = time.perf_counter() - started
    return metrics


def images_per_class(default: int | None = None) -> int | None:
    """The embedded dataset's images per class for these parts: BENCH_TRAINER_IMAGES_PER_CLASS,
    else `default` (None: the dataset's own)."""
    return int(IMAGES_PER_CLASS) if IMAGES_PER_CLASS else default


def run(output_dir: str) -> list[dict]:
    from benchmarks.input_data import default_dataset_splits

    train_files, eval_files = default_dataset_splits(output_dir, images_per_class())
    records = []
    baseline = None
    with tempfile.TemporaryDirectory(prefix="regularization-") as directory:
        for setting, changes in SETTINGS.items():
            config = default_config(**changes)
            workdir = os.path.join(directory, setting)
            metrics = timed_train(config, train_files, eval_files, workdir)
            record = {
                "name": f"regularization.{setting}.eval_accuracy",
                "value": metrics["eval_accuracy"],
                "unit": "accuracy",
                "setting": setting,
                "eval_loss": metrics["eval_loss"],
                "train_accuracy": metrics["train_accuracy"],
                "wall_seconds": metrics["wall_seconds"],
                "train_seconds": metrics["train_seconds"],
                "epochs": metrics["epochs"],
                "train_function_traces": metrics["train_function_traces"],
                "seed": config.seed,
            }
            if setting == BASELINE:
                baseline = metrics["eval_accuracy"]
            elif baseline:
                record["ratio"] = metrics["eval_accuracy"] / baseline
                record["baseline"] = f"regularization.{BASELINE}"
            print(
                f"regularization {setting:<20} eval accuracy {metrics['eval_accuracy']:.3f}  "
                f"{metrics['wall_seconds']:.0f} s",
                flush=True,
            )
            records.append(record)
    return records


def chart(records: list[dict], path: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axes = plt.subplots(1, 2, figsize=(11, 4))
    names = [r["setting"] for r in records]
    bars = axes[0].bar(names, [r["value"] for r in records], color="#4a7ab5")
    label_bars(axes[0], bars, [value_and_ratio(r) for r in records])
    axes[0].set_title("eval accuracy (ratio to off)")
    axes[0].set_ylim(0, 1.1)
    bars = axes[1].bar(names, [r["wall_seconds"] for r in records], color="#999999")
    label_bars(axes[1], bars, [f"{r['wall_seconds']:.0f}" for r in records])
    axes[1].set_title("wall time of the train() call, s")
    for axis in axes:
        axis.tick_params(axis="x", labelsize=8)
    figure.suptitle("default trainer on the embedded dataset, one seed each (machine shared)")
    figure.tight_layout()
    figure.savefig(path, dpi=110)
    plt.close(figure)


def meaning(records: list[dict]) -> list[str]:
    return [
        "Eval accuracy of the default trainer: "
        + ", ".join(
            f"{r['setting']} {r['value']:.3f}"
            + (f" ({r['ratio']:.2f}x {BASELINE})" if "ratio" in r else "")
            for r in records
        )
        + ".",
        "One seed each: a point or two either way is within seed noise.",
    ]
