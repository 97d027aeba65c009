"""The label audit: likely label errors over every image, not only the eval split's.

DataHealthGen can only judge the eval images: they are the ones the pipeline's model never
trained on. The audit makes every image out-of-sample over K folds (data_prep/quality/folds.py
keeps near-duplicates in one fold), by one of two methods:
- embeddings: EfficientNet-Lite0's ImageNet embedding of each image, computed once
  (image_embeddings.py), and per fold a logistic regression fitted on the other folds
  (data_prep/quality/linear_probe.py): cleanlab's recommended path for images, in seconds;
- training: K models from the trainer core, each on K-1 folds, each scoring its held-out fold.
cleanlab then reads the whole out-of-sample probability matrix, and the report has the shape of
DataHealthGen's health.json (components/validation/data_health.py), with every image counted as
an eval image, plus the folds and the method under `audit`.

Files: health.json and eval_scores.npz (labels, probabilities and source paths of every image,
fold by fold) in the report folder; the training method's shards and models live in a work
folder the audit creates new, removed when the trainings end, whether they finished or not.
When the held-out models do no better than always answering the most common class, their
disagreements with the labels are noise: the report says so and lists no suspects.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import shutil
import tempfile

import numpy as np
import tensorflow as tf

from components import metadata_keys
from components.evaluation import evaluation_report
from components.evaluation.eval_split import read_batches
from components.training.preprocessing import compute_normalization
from components.training.train import train
from components.training.trainer_config import OFFLINE_IMAGENET, TrainerConfig
from components.validation import data_health, image_embeddings
from data_prep.contract import features
from data_prep.quality.folds import FoldError, assign_folds
from data_prep.quality.linear_probe import out_of_fold_probabilities
from data_prep.writing.plan import cluster_keys
from data_prep.writing.tfrecord import GzipTFRecordWriter

FOLD_FILE = "fold-{index:02d}.tfrecord.gz"
WORK_DIR = "work"


@dataclasses.dataclass(frozen=True)
class AuditInput:
    """A dataset as the ingest wrote it: every shard, the class names in label-id order and the
    ingest report (near-duplicate clusters, odd images)."""

    files: list[str]
    label_names: list[str]
    ingest: dict


def fold_assignment(data: AuditInput, folds: int) -> dict[str, int]:
    """Every image's fold (source path -> fold), near-duplicate clusters kept whole."""
    spec = {key: features.feature_spec()[key] for key in (features.SOURCE_PATH, features.SHA256)}
    spec[features.LABEL] = features.feature_spec()[features.LABEL]
    sha256, labels = {}, {}
    dataset = tf.data.TFRecordDataset(data.files, compression_type="GZIP").batch(512)
    for records in dataset:
        parsed = tf.io.parse_example(records, spec)
        for path, digest, label in zip(
            parsed[features.SOURCE_PATH].numpy(),
            parsed[features.SHA256].numpy(),
            parsed[features.LABEL].numpy(),
            strict=True,
        ):
            sha256[path.decode()] = digest.decode()
            labels[path.decode()] = data.label_names[label]
    keys = cluster_keys(sha256, data.ingest.get("near_duplicates", []))
    return assign_folds(keys, labels, folds)


def write_folds(files: list[str], fold_of: dict[str, int], folds: int, directory: str) -> list[str]:
    """Each fold's examples, as they are, in one gzip TFRecord file per fold; returns the files."""
    paths = [os.path.join(directory, FOLD_FILE.format(index=i)) for i in range(folds)]
    with contextlib.ExitStack() as stack:
        writers = [stack.enter_context(GzipTFRecordWriter(path)) for path in paths]
        for batch in read_batches(files):
            for record, path in zip(batch.records.numpy(), batch.source_paths, strict=True):
                writers[fold_of[path]].write(record)
    return paths


def check_fold_sizes(fold_of: dict[str, int], folds: int, config: TrainerConfig) -> None:
    """Before any training: every fold's training images fill at least one batch."""
    sizes = np.bincount(list(fold_of.values()), minlength=folds)
    batch = config.batch_size * config.gradient_accumulation_steps
    smallest = int(len(fold_of) - sizes.max())
    if smallest < batch:
        raise FoldError(
            f"{len(fold_of)} images in {folds} folds leave {smallest} training images in a "
            f"fold, less than one batch of {batch} (trainer.batch_size x "
            "trainer.gradient_accumulation_steps); use fewer folds or more images"
        )


def run_audit(
    config: TrainerConfig,
    data: AuditInput,
    folds: int,
    report_dir: str,
    on_fold=None,
) -> dict:
    """Trains `folds` models, scores each held-out fold, finds the label issues among all images;
    writes health.json and eval_scores.npz into report_dir and returns the health report.

    on_fold(index, images): called as each fold's training starts (0-based index), to show
    progress.
    """
    config = dataclasses.replace(config, warm_start=False, report_input_pipeline=False)
    config.validate()
    fold_of = fold_assignment(data, folds)
    check_fold_sizes(fold_of, folds, config)
    os.makedirs(report_dir, exist_ok=True)
    work = tempfile.mkdtemp(prefix=f".{WORK_DIR}-", dir=report_dir)  # a new folder, ours alone
    try:
        held_out, accuracies = _train_folds(config, data, fold_of, folds, work, on_fold)
    finally:  # the folds' shards and models: a copy of the data and K models nobody serves
        shutil.rmtree(work, ignore_errors=True)
    scores = evaluation_report.EvalScores(
        np.concatenate([s.labels for s in held_out]),
        np.concatenate([s.probabilities for s in held_out]),
        [path for s in held_out for path in s.source_paths],
    )
    settings = {
        "model": config.model,
        "epochs": config.epochs,
        "image_size": config.image_size,
    }
    folded = [len(s.labels) for s in held_out], accuracies
    return _report(data, scores, folded, (metadata_keys.AUDIT_TRAINING, settings), report_dir)


def run_embedding_audit(
    data: AuditInput,
    folds: int,
    report_dir: str,
    image_size: int = image_embeddings.DEFAULT_IMAGE_SIZE,
) -> dict:
    """Scores every image by a logistic regression on Lite0 ImageNet embeddings fitted on the
    other folds (the same folds as run_audit), then as run_audit: cleanlab, health.json and
    eval_scores.npz in report_dir; returns the health report."""
    fold_of = fold_assignment(data, folds)
    embedded = image_embeddings.embed_examples(data.files, image_size)
    fold = np.array([fold_of[path] for path in embedded.source_paths], np.int64)
    probabilities = out_of_fold_probabilities(
        embedded.vectors, embedded.labels, fold, len(data.label_names)
    )
    order = np.argsort(fold, kind="stable")  # fold by fold, as the trained models score them
    scores = evaluation_report.EvalScores(
        embedded.labels[order], probabilities[order], [embedded.source_paths[i] for i in order]
    )
    correct = probabilities.argmax(axis=1) == embedded.labels
    accuracies = [float(np.mean(correct[fold == index])) for index in range(folds)]
    sizes = np.bincount(fold, minlength=folds).tolist()
    settings = {
        "model": f"{OFFLINE_IMAGENET} imagenet embeddings, logistic regression",
        "image_size": image_size,
    }
    os.makedirs(report_dir, exist_ok=True)
    models = (metadata_keys.AUDIT_EMBEDDINGS, settings)
    return _report(data, scores, (sizes, accuracies), models, report_dir)


def _report(
    data: AuditInput,
    scores: evaluation_report.EvalScores,
    folded: tuple[list[int], list[float]],
    models: tuple[str, dict],
    report_dir: str,
) -> dict:
    """The health report of out-of-sample scores (none listed at chance), written and returned.

    folded: each fold's image count and held-out accuracy; models: the audit method and the
    settings of the models that made the scores.
    """
    health = data_health.build_health(data.ingest, scores, data.label_names)
    overall = float(np.mean(np.argmax(scores.probabilities, axis=1) == scores.labels))
    chance = chance_accuracy(scores.labels)
    at_chance = not clearly_above_chance(overall, chance, int(scores.labels.size))
    if at_chance:  # models that guess cannot say which labels are wrong
        health["label_issues"] = []
    sizes, accuracies = folded
    method, settings = models
    health["audit"] = {
        "method": method,
        "folds": len(sizes),
        "images_per_fold": sizes,
        "held_out_accuracy": accuracies,
        "held_out_accuracy_overall": overall,
        "chance_accuracy": chance,
        "at_chance": at_chance,
        "trainer": settings,
    }
    data_health.write_health(health, report_dir)
    evaluation_report.write_scores(scores, report_dir)
    return health


def chance_accuracy(labels: np.ndarray) -> float:
    """The accuracy of always answering the most common class."""
    return float(np.bincount(labels).max() / labels.size) if labels.size else 0.0


def clearly_above_chance(accuracy: float, chance: float, images: int) -> bool:
    """accuracy beats chance by more than two standard errors of a guesser's accuracy on
    `images` images: below that, the models' disagreements with the labels are noise."""
    margin = 2.0 * np.sqrt(chance * (1.0 - chance) / max(images, 1))
    return accuracy > chance + margin


def _train_folds(
    config: TrainerConfig,
    data: AuditInput,
    fold_of: dict[str, int],
    folds: int,
    work: str,
    on_fold,
) -> tuple[list[evaluation_report.EvalScores], list[float]]:
    """Each fold's held-out scores and accuracy, from a model trained on the other folds."""
    fold_files = write_folds(data.files, fold_of, folds, work)
    held_out, accuracies = [], []
    for index, held in enumerate(fold_files):
        if on_fold is not None:
            on_fold(index, sum(fold == index for fold in fold_of.values()))
        training = [path for path in fold_files if path != held]
        metrics = train(
            config,
            training,
            [held],
            data.label_names,
            compute_normalization(training, config.image_size),
            output_dir=os.path.join(work, f"fold-{index:02d}"),
        )
        held_out.append(evaluation_report.score_split(metrics["serving_model_dir"], [held]))
        accuracies.append(float(metrics["eval_accuracy"]))
    return held_out, accuracies
