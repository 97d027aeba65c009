"""Transfer learning on real scans: does fine-tuning a pretrained backbone pay with few images?

scikit-learn's handwritten digits (load_digits: 1,797 real 8x8 scans, bundled, no download),
upsampled to the input size by the trainer's own preprocessing. A backbone is pretrained on the
digits 0-4 (all their images, with the preprocessing its fine-tuning will use) and its weights
file saved; then digits 5-9 are learned from 10, 30 and 100 images per class with the same
configured epochs, batch and evaluation split (EVAL_PER_CLASS images per class held out):
  scratch: random weights, dataset statistics;
  fine_tuned: the weights file, frozen_epochs with the backbone frozen, then fine-tuning;
  fine_tuned.no_frozen: the weights file, every layer training from the first step;
  scratch.same_steps: scratch trained for as many epochs as fine_tuned ran.
The trainer's floor of optimizer steps per phase (min_phase_steps, its default) stretches the
epochs of small training sets, and fine-tuning has two phases to scratch's one, so at 10 and 30
per class fine_tuned trains more steps than scratch; scratch.same_steps is the control that
gives scratch the same budget. Each is one train() call (the trainer's whole path: input
pipeline, engine, export); its wall time is measured around that call. All in one process, one
run, side by side.
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

# The default small_cnn at 32x32: the 8x8 scans hold no more detail, and MobileNetV3Small's
# tracing and export alone take minutes per training run on two cores.
MODEL = "small_cnn"
IMAGE_SIZE = 32
BATCH_SIZE = 16
PRETRAIN_EPOCHS = 15
EPOCHS = 20
FROZEN_EPOCHS = 5
IMAGES_PER_CLASS = (10, 30, 100)
EVAL_PER_CLASS = 50
PRETRAIN_CLASSES = tuple(range(5))
TARGET_CLASSES = tuple(range(5, 10))
SEED = 0
SETTINGS = ("scratch", "fine_tuned", "fine_tuned.no_frozen", "scratch.same_steps")


def _digits() -> tuple:
    """(images uint8 [n, 8, 8], labels int [n]) of load_digits, on a 0..255 scale."""
    import numpy as np
    from sklearn.datasets import load_digits

    digits = load_digits()
    images = np.round(digits.images * (255.0 / 16.0)).astype(np.uint8)
    return images, digits.target


def _write_shard(path: str, images, labels, class_ids: tuple[int, ...]) -> None:
    """Grayscale scans as RGB PNGs in the data contract's tf.Examples; labels renumbered 0.. in
    class_ids order."""
    from PIL import Image

    from data_prep.contract import features
    from data_prep.writing.tfrecord import GzipTFRecordWriter

    with GzipTFRecordWriter(path) as writer:
        for index, (image, digit) in enumerate(zip(images, labels, strict=True)):
            buffer = io.BytesIO()
            Image.fromarray(image).convert("RGB").save(buffer, format="PNG")
            encoded = buffer.getvalue()
            label = class_ids.index(int(digit))
            row = {
                features.IMAGE: encoded,
                features.IMAGE_FORMAT: b"png",
                features.HEIGHT: 8,
                features.WIDTH: 8,
                features.LABEL: label,
                features.LABEL_NAME: str(digit),
                features.SOURCE_PATH: f"digits/{digit}/{index}.png",
                features.SHA256: hashlib.sha256(encoded).hexdigest(),
            }
            writer.write(features.serialize_example(row))


def _subset(labels, order, class_ids, per_class: int | None, skip: int) -> list[int]:
    """Indices of `per_class` images of each class (all when None) after the first `skip` of
    that class in `order` (one seeded shuffle for the whole run, so subsets that skip the
    evaluation images never overlap them)."""
    chosen = []
    for digit in class_ids:
        indices = [i for i in order if labels[i] == digit]
        chosen += indices[skip : None if per_class is None else skip + per_class]
    return chosen


def _config(**changes):
    from components.training.trainer_config import TrainerConfig

    base = TrainerConfig(
        model=MODEL,
        image_size=IMAGE_SIZE,
        batch_size=BATCH_SIZE,
        shuffle_buffer=10 * BATCH_SIZE,
        epochs=EPOCHS,
        warmup_epochs=2,
        frozen_epochs=FROZEN_EPOCHS,
        steps_per_execution=8,
        checkpoint_every_steps=0,
        seed=SEED,
        report_input_pipeline=False,
    )
    return dataclasses.replace(base, **changes).validate()


def _setting_config(setting: str, weights: str, fine_tuned_epochs: int | None):
    """The trainer config of one setting; scratch.same_steps needs the epochs fine_tuned ran
    (its configured epochs, stretched by the step floor)."""
    if setting == "fine_tuned":
        return _config(weights_path=weights)
    if setting == "fine_tuned.no_frozen":
        return _config(weights_path=weights, frozen_epochs=0)
    if setting == "scratch.same_steps":
        return _config(epochs=fine_tuned_epochs)
    return _config()


def _train(config, train_file: str, eval_file: str, names: list[str], workdir: str) -> dict:
    from components.training.preprocessing import compute_normalization
    from components.training.train import train

    normalization = compute_normalization([train_file], config.image_size)
    started = time.perf_counter()
    metrics = train(config, train_file, eval_file, names, normalization, workdir)
    metrics["wall_seconds"] = time.perf_counter() - started
    return metrics


def _pretrained_weights(images, labels, directory: str) -> tuple[str, dict]:
    """Pretrains on every image of PRETRAIN_CLASSES; returns the backbone's weights file and the
    pretraining's metrics."""
    import numpy as np

    from components.training.model import backbone_of, build_model
    from components.training.preprocessing import compute_normalization
    from components.training.warm_start import load_base_weights

    indices = _subset(labels, np.arange(len(labels)), PRETRAIN_CLASSES, None, 0)
    shard = os.path.join(directory, "pretrain.gz")
    _write_shard(shard, images[indices], labels[indices], PRETRAIN_CLASSES)
    names = [str(digit) for digit in PRETRAIN_CLASSES]
    config = _config(epochs=PRETRAIN_EPOCHS, backbone_preprocessing=True)
    metrics = _train(config, shard, shard, names, os.path.join(directory, "pretrain"))
    model = build_model(config, len(names), compute_normalization([shard], IMAGE_SIZE))
    load_base_weights(model, metrics["serving_model_dir"], names)
    path = os.path.join(directory, "backbone.h5")
    backbone_of(model).save_weights(path)
    return path, metrics


def run(output_dir: str) -> list[dict]:
    import numpy as np

    del output_dir  # everything but the records is scratch
    images, labels = _digits()
    records = []
    with tempfile.TemporaryDirectory(prefix="transfer-") as directory:
        weights, pretrain = _pretrained_weights(images, labels, directory)
        records.append(
            {
                "name": "transfer.pretrain.digits_0_4.train_accuracy",
                "value": pretrain["train_accuracy"],
                "unit": "accuracy",
                "wall_seconds": pretrain["wall_seconds"],
                "images": pretrain["steps_per_epoch"] * BATCH_SIZE,
            }
        )
        order = np.random.default_rng(SEED).permutation(len(labels))
        evaluation = _subset(labels, order, TARGET_CLASSES, EVAL_PER_CLASS, 0)
        eval_file = os.path.join(directory, "eval.gz")
        _write_shard(eval_file, images[evaluation], labels[evaluation], TARGET_CLASSES)
        names = [str(digit) for digit in TARGET_CLASSES]
        for per_class in IMAGES_PER_CLASS:
            chosen = _subset(labels, order, TARGET_CLASSES, per_class, EVAL_PER_CLASS)
            train_file = os.path.join(directory, f"train_{per_class}.gz")
            _write_shard(train_file, images[chosen], labels[chosen], TARGET_CLASSES)
            scratch_accuracy = fine_tuned_epochs = None
            for setting in SETTINGS:
                config = _setting_config(setting, weights, fine_tuned_epochs)
                workdir = os.path.join(directory, f"{setting}_{per_class}")
                metrics = _train(config, train_file, eval_file, names, workdir)
                if setting == "fine_tuned":
                    fine_tuned_epochs = metrics["epochs"]
                record = {
                    "name": f"transfer.{per_class}_per_class.{setting}.eval_accuracy",
                    "value": metrics["eval_accuracy"],
                    "unit": "accuracy",
                    "setting": setting,
                    "images_per_class": per_class,
                    "wall_seconds": metrics["wall_seconds"],
                    "train_seconds": metrics["train_seconds"],
                    "epochs": metrics["epochs"],
                    "optimizer_steps": metrics["optimizer_steps"],
                    "phases": metrics["phases"],
                    "train_function_traces": metrics["train_function_traces"],
                    "eval_images": len(evaluation),
                }
                if setting == "scratch":
                    scratch_accuracy = metrics["eval_accuracy"]
                elif scratch_accuracy:
                    record["ratio"] = metrics["eval_accuracy"] / scratch_accuracy
                    record["baseline"] = f"transfer.{per_class}_per_class.scratch"
                print(
                    f"transfer {per_class:>3}/class {setting:<21} eval accuracy "
                    f"{metrics['eval_accuracy']:.3f}  {metrics['optimizer_steps']} steps  "
                    f"{metrics['wall_seconds']:.1f} s",
                    flush=True,
                )
                records.append(record)
    return records


def chart(records: list[dict], path: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    runs = [r for r in records if "setting" in r]
    figure, axes = plt.subplots(1, 2, figsize=(12, 4))
    width = 0.2
    colors = {
        "scratch": "#999999",
        "fine_tuned": "#4a7ab5",
        "fine_tuned.no_frozen": "#b5854a",
        "scratch.same_steps": "#555555",
    }
    for offset, setting in enumerate(SETTINGS):
        mine = [r for r in runs if r["setting"] == setting]
        positions = [
            IMAGES_PER_CLASS.index(r["images_per_class"]) + (offset - 1.5) * width for r in mine
        ]
        for axis, key, fmt in ((axes[0], "value", "{:.2f}"), (axes[1], "wall_seconds", "{:.0f}")):
            bars = axis.bar(
                positions, [r[key] for r in mine], width, label=setting, color=colors[setting]
            )
            label_bars(axis, bars, [fmt.format(r[key]) for r in mine])
    for axis, title in (
        (axes[0], "eval accuracy, digits 5-9"),
        (axes[1], "wall time of the train() call, s"),
    ):
        axis.set_xticks(range(len(IMAGES_PER_CLASS)), [f"{n}/class" for n in IMAGES_PER_CLASS])
        axis.set_title(title)
    axes[0].legend(fontsize=8, loc="lower right")
    figure.suptitle(
        f"{MODEL} {IMAGE_SIZE}x{IMAGE_SIZE}, pretrained on digits 0-4; {EPOCHS} epochs each, "
        f"every phase at least {_config().min_phase_steps} steps"
    )
    figure.tight_layout()
    figure.savefig(path, dpi=110)
    plt.close(figure)
