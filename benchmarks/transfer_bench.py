"""Transfer learning on real images: do EfficientNet-Lite0's ImageNet weights pay with few images?

Two sets of real images nobody here drew, both offline:
  digits: scikit-learn's handwritten digits (load_digits: 1,797 real 8x8 scans, bundled), all ten
    classes, upsampled to the input size by the trainer's own preprocessing;
  photos: patches of scikit-image's sample photographs, one class per photograph
    (benchmarks/photo_data.PHOTOS). Training patches come from the left part of each
    photograph, evaluation patches from the right part, so no pixel is in both splits.
Each is learned from 10, 30 and 100 training images per class, with the same epochs, batch and
evaluation split (EVAL_PER_CLASS images per class held out), three ways:
  small_cnn: the default network, from scratch;
  lite0_imagenet: EfficientNet-Lite0 from its ImageNet weights (trainer.weights=imagenet):
    frozen_epochs with the backbone frozen, then fine-tuning, at the trainer's fine-tuning
    rate and image size for it (the others train at IMAGE_SIZE);
  lite0_scratch: EfficientNet-Lite0 from random weights.
A floor of optimizer steps per phase (trainer.min_phase_steps) stretches the epochs of small
training sets. Each run is one train() call (the trainer's whole path: input pipeline, engine,
export); its wall time is measured around that call. BENCH_TRANSFER_DATASETS picks the datasets
(default: both, one after the other in one process).
"""

from __future__ import annotations

import dataclasses
import hashlib
import io
import os
import tempfile
import time

import components  # noqa: F401  (sets TF_USE_LEGACY_KERAS before TensorFlow loads)
from benchmarks.charts import label_bars
from benchmarks.report import Section

IMAGE_SIZE = 64
BATCH_SIZE = 16
# Lite0 from ImageNet needs the fine-tuning steps: at 5 epochs it stopped at 0.92 training
# accuracy on digits (30 per class), at 12 it fits them (docs/training.md).
EPOCHS = 12
FROZEN_EPOCHS = 2
# Half the trainer's default floor of steps per phase: a whole run of three networks, two
# datasets and three sizes then fits in about an hour on two shared cores.
MIN_PHASE_STEPS = 50
IMAGES_PER_CLASS = (10, 30, 100)
EVAL_PER_CLASS = 30
SEED = 0
DATASETS = tuple(os.environ.get("BENCH_TRANSFER_DATASETS", "digits photos").split())
SETTINGS = ("small_cnn", "lite0_imagenet", "lite0_scratch")
PATCH_FRACTION = (0.25, 0.45)  # a patch's side, as a share of its photograph's shorter side
TRAIN_SHARE = 0.6  # of each photograph's width, on the left, that training patches come from


def _digits() -> dict:
    """Class name -> (images uint8 [n, 8, 8] on a 0..255 scale, in a seeded order)."""
    import numpy as np
    from sklearn.datasets import load_digits

    digits = load_digits()
    images = np.round(digits.images * (255.0 / 16.0)).astype(np.uint8)
    order = np.random.default_rng(SEED).permutation(len(images))
    return {str(d): images[[i for i in order if digits.target[i] == d]] for d in range(10)}


def _patches(photo, count: int, left: int, right: int, rng) -> list:
    """`count` random square patches of `photo` whose columns lie in [left, right)."""
    shorter = min(photo.shape[0], right - left)
    patches = []
    for _ in range(count):
        side = int(rng.uniform(*PATCH_FRACTION) * min(photo.shape[:2]))
        side = min(side, shorter)
        top = rng.integers(0, photo.shape[0] - side + 1)
        start = rng.integers(left, right - side + 1)
        patches.append(photo[top : top + side, start : start + side])
    return patches


def _photos() -> dict:
    """Class name -> (train patches, eval patches): RGB uint8 arrays of varied sizes."""
    import numpy as np
    import skimage.data

    from benchmarks.photo_data import PHOTOS

    rng = np.random.default_rng(SEED)
    classes = {}
    for name in PHOTOS:
        photo = getattr(skimage.data, name)()
        split = int(photo.shape[1] * TRAIN_SHARE)
        train = _patches(photo, max(IMAGES_PER_CLASS), 0, split, rng)
        evaluation = _patches(photo, EVAL_PER_CLASS, split, photo.shape[1], rng)
        classes[name] = (train, evaluation)
    return classes


def _splits(dataset: str) -> dict:
    """Class name -> (train images, eval images); the first n train images of a class are the
    training set of n per class."""
    if dataset == "photos":
        return _photos()
    return {
        name: (list(images[EVAL_PER_CLASS:]), list(images[:EVAL_PER_CLASS]))
        for name, images in _digits().items()
    }


def _write_shard(path: str, rows: list[tuple]) -> None:
    """(image uint8 array, label, class name) rows as PNGs in the data contract's tf.Examples."""
    from PIL import Image

    from data_prep.contract import features
    from data_prep.writing.tfrecord import GzipTFRecordWriter

    with GzipTFRecordWriter(path) as writer:
        for index, (image, label, name) in enumerate(rows):
            buffer = io.BytesIO()
            Image.fromarray(image).convert("RGB").save(buffer, format="PNG")
            encoded = buffer.getvalue()
            row = {
                features.IMAGE: encoded,
                features.IMAGE_FORMAT: b"png",
                features.HEIGHT: image.shape[0],
                features.WIDTH: image.shape[1],
                features.LABEL: label,
                features.LABEL_NAME: name,
                features.SOURCE_PATH: f"{name}/{index}.png",
                features.SHA256: hashlib.sha256(encoded).hexdigest(),
            }
            writer.write(features.serialize_example(row))


def _config(setting: str, dataset: str):
    from components.training.trainer_config import (
        DEFAULT_AUGMENT,
        TrainerConfig,
        backbone_defaults,
    )

    model = {"small_cnn": "small_cnn"}.get(setting, "efficientnet_lite0")
    # Digits have handedness: no mirror images of them.
    augment = dataclasses.replace(DEFAULT_AUGMENT, flip=dataset != "digits")
    config = TrainerConfig(
        model=model,
        weights="imagenet" if setting == "lite0_imagenet" else None,
        image_size=IMAGE_SIZE,
        batch_size=BATCH_SIZE,
        shuffle_buffer=10 * BATCH_SIZE,
        epochs=EPOCHS,
        warmup_epochs=1,
        frozen_epochs=FROZEN_EPOCHS,
        min_phase_steps=MIN_PHASE_STEPS,
        steps_per_execution=8,
        checkpoint_every_steps=0,
        seed=SEED,
        report_input_pipeline=False,
        augment=augment,
    )
    # What a user who sets only the model and its weights gets: Lite0 from ImageNet fine-tunes
    # at its own rate and image size.
    return dataclasses.replace(config, **backbone_defaults(config)).validate()


def _train(config, train_file: str, eval_file: str, names: list[str], workdir: str) -> dict:
    from components.training.preprocessing import compute_normalization
    from components.training.train import train

    normalization = compute_normalization([train_file], config.image_size)
    started = time.perf_counter()
    metrics = train(config, train_file, eval_file, names, normalization, workdir)
    metrics["wall_seconds"] = time.perf_counter() - started
    return metrics


def _record(config, dataset: str, per_class: int, setting: str, metrics: dict, eval_images: int):
    return {
        "name": f"transfer.{dataset}.{per_class}_per_class.{setting}.eval_accuracy",
        "value": metrics["eval_accuracy"],
        "unit": "accuracy",
        "dataset": dataset,
        "setting": setting,
        "images_per_class": per_class,
        "image_size": config.image_size,
        "wall_seconds": metrics["wall_seconds"],
        "train_seconds": metrics["train_seconds"],
        "epochs": metrics["epochs"],
        "optimizer_steps": metrics["optimizer_steps"],
        "phases": metrics["phases"],
        "eval_images": eval_images,
    }


def run(output_dir: str) -> list[dict]:
    del output_dir  # everything but the records is scratch
    records = []
    with tempfile.TemporaryDirectory(prefix="transfer-") as directory:
        for dataset in DATASETS:
            splits = _splits(dataset)
            names = list(splits)
            eval_rows = [
                (image, label, name)
                for label, name in enumerate(names)
                for image in splits[name][1]
            ]
            eval_file = os.path.join(directory, f"{dataset}_eval.gz")
            _write_shard(eval_file, eval_rows)
            for per_class in IMAGES_PER_CLASS:
                train_file = os.path.join(directory, f"{dataset}_train_{per_class}.gz")
                rows = [
                    (image, label, name)
                    for label, name in enumerate(names)
                    for image in splits[name][0][:per_class]
                ]
                _write_shard(train_file, rows)
                for setting in SETTINGS:
                    workdir = os.path.join(directory, f"{dataset}_{setting}_{per_class}")
                    config = _config(setting, dataset)
                    metrics = _train(config, train_file, eval_file, names, workdir)
                    records.append(
                        _record(config, dataset, per_class, setting, metrics, len(eval_rows))
                    )
                    print(
                        f"transfer {dataset:<6} {per_class:>3}/class {setting:<14} eval accuracy "
                        f"{metrics['eval_accuracy']:.3f}  {metrics['optimizer_steps']} steps  "
                        f"{metrics['wall_seconds']:.1f} s",
                        flush=True,
                    )
    return records


def chart(records: list[dict], path: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    runs = [r for r in records if "setting" in r]
    figure, axes = plt.subplots(len(DATASETS), 2, figsize=(12, 4 * len(DATASETS)), squeeze=False)
    width = 0.25
    colors = {"small_cnn": "#999999", "lite0_imagenet": "#4a7ab5", "lite0_scratch": "#b5854a"}
    for row, dataset in enumerate(DATASETS):
        for offset, setting in enumerate(SETTINGS):
            mine = [r for r in runs if r["setting"] == setting and r["dataset"] == dataset]
            positions = [
                IMAGES_PER_CLASS.index(r["images_per_class"]) + (offset - 1) * width for r in mine
            ]
            for axis, key, fmt in (
                (axes[row][0], "value", "{:.2f}"),
                (axes[row][1], "wall_seconds", "{:.0f}"),
            ):
                bars = axis.bar(
                    positions, [r[key] for r in mine], width, label=setting, color=colors[setting]
                )
                label_bars(axis, bars, [fmt.format(r[key]) for r in mine])
        for axis, title in (
            (axes[row][0], f"eval accuracy, {dataset}"),
            (axes[row][1], f"wall time of the train() call, s, {dataset}"),
        ):
            axis.set_xticks(range(len(IMAGES_PER_CLASS)), [f"{n}/class" for n in IMAGES_PER_CLASS])
            axis.set_title(title)
        axes[row][0].legend(fontsize=8, loc="lower right")
    figure.suptitle(
        f"{_sizes(runs)}, {EPOCHS} epochs ({FROZEN_EPOCHS} frozen for lite0_imagenet), "
        f"every phase at least {MIN_PHASE_STEPS} steps"
    )
    figure.tight_layout()
    figure.savefig(path, dpi=110)
    plt.close(figure)


def _sizes(records: list[dict]) -> str:
    """The image size of each setting, as the records measured them (IMAGE_SIZE in records
    from before they held it)."""
    sizes = {r["setting"]: r.get("image_size", IMAGE_SIZE) for r in records if "setting" in r}
    return "; ".join(f"{setting} {size}x{size} pixels" for setting, size in sizes.items())


def section(records: list[dict]) -> Section:
    """A row per dataset and training-set size: each setting's eval accuracy and wall time."""
    from components.training.trainer_config import IMAGENET_FINE_TUNE_LEARNING_RATE

    runs = {(r["dataset"], r["images_per_class"], r["setting"]): r for r in records}
    rows = []
    for dataset, per_class in dict.fromkeys((r["dataset"], r["images_per_class"]) for r in records):
        mine = [runs.get((dataset, per_class, setting)) for setting in SETTINGS]
        rows.append(
            (
                dataset,
                str(per_class),
                *(f"{r['value']:.3f}" if r else "" for r in mine),
                *(f"{r['wall_seconds']:.0f}" if r else "" for r in mine),
            )
        )
    eval_images = {r["dataset"]: r["eval_images"] for r in records}
    notes = (
        f"{_sizes(records)}, batch {BATCH_SIZE}, {EPOCHS} epochs "
        f"({FROZEN_EPOCHS} of them with the backbone frozen for lite0_imagenet, then fine-tuning "
        f"at {IMAGENET_FINE_TUNE_LEARNING_RATE:g}, the trainer's default for ImageNet weights), "
        f"each phase at least {MIN_PHASE_STEPS} steps; the "
        "trainer's default augmentation (no flip for digits).",
        "Eval images: "
        + ", ".join(f"{count} {dataset}" for dataset, count in eval_images.items())
        + f" ({EVAL_PER_CLASS} per class). Photos: patches of scikit-image's "
        "sample photographs, a class per photograph, training patches from the left "
        f"{TRAIN_SHARE:.0%} of each, evaluation patches from the rest.",
        "Time: the whole train() call (input pipeline, training, evaluation, export), on a "
        "shared 2-core machine.",
    )
    started = {r["dataset"]: r.get("run", {}) for r in records}
    if len({str(run) for run in started.values()}) > 1:
        notes += (
            "Datasets measured by separate processes, side by side: "
            + "; ".join(
                f"{dataset} from {run.get('measured_at')} "
                f"({', '.join(f'{k}={v}' for k, v in run.get('settings', {}).items())})"
                for dataset, run in started.items()
            )
            + ".",
        )
    columns = ("images", "per class", *(f"{s} acc." for s in SETTINGS))
    columns += tuple(f"{s} s" for s in SETTINGS)
    return Section(
        "Transfer: EfficientNet-Lite0's ImageNet weights against training from scratch",
        columns,
        tuple(rows),
        notes,
    )
