"""The audit on tiny data with flipped labels, every image scored once out of sample: K trainings
of the runlocal trainer (which learns nothing, so no figure of model quality is asserted), or a
logistic regression per fold on Lite0 ImageNet embeddings (which see the colours)."""

import dataclasses
import hashlib
import io
import os

import numpy as np
import pytest
from PIL import Image

from components.evaluation import evaluation_report
from components.training.trainer_config import runlocal
from components.validation import data_health, label_audit
from data_prep.contract import features
from data_prep.quality.folds import FoldError
from data_prep.writing.tfrecord import GzipTFRecordWriter

NAMES = ["blue", "green", "red"]
PER_CLASS = 8
FLIPPED = {"red/1.png": "blue", "green/5.png": "red"}  # path -> the wrong label it carries
TWINS = ["blue/0.png", "blue/0_copy.png"]  # a near-duplicate pair


def _png(colour: int, seed: int) -> bytes:
    pixels = np.random.default_rng(seed).integers(0, 60, (20, 20, 3), dtype=np.uint8)
    pixels[..., colour] += 180
    buffer = io.BytesIO()
    Image.fromarray(pixels).save(buffer, format="PNG")
    return buffer.getvalue()


def write_dataset(folder) -> dict[str, str]:
    """Two shards of PER_CLASS images per colour, plus a copy; returns path -> given label."""
    images = [
        (f"{name}/{i}.png", c, c * 100 + i)
        for c, name in enumerate(NAMES)
        for i in range(PER_CLASS)
    ]
    images.append((TWINS[1], 0, 0))
    given = {}
    os.makedirs(folder / "Split-train")
    os.makedirs(folder / "Split-eval")
    with (
        GzipTFRecordWriter(str(folder / "Split-train" / "data-0.gz")) as train,
        GzipTFRecordWriter(str(folder / "Split-eval" / "data-0.gz")) as evaluation,
    ):
        for index, (path, colour, seed) in enumerate(images):
            encoded = _png(colour, seed)
            label = FLIPPED.get(path, NAMES[colour])
            given[path] = label
            (evaluation if index % 5 == 0 else train).write(
                features.serialize_example(
                    {
                        features.IMAGE: encoded,
                        features.IMAGE_FORMAT: b"png",
                        features.HEIGHT: 20,
                        features.WIDTH: 20,
                        features.LABEL: NAMES.index(label),
                        features.LABEL_NAME: label,
                        features.SOURCE_PATH: path,
                        features.SHA256: hashlib.sha256(encoded).hexdigest(),
                    }
                )
            )
    return given


def audit_input(folder) -> label_audit.AuditInput:
    ingest = {
        "near_duplicates": [TWINS],
        "near_duplicate_share": {"clusters": 1, "images": 2, "fraction": 2 / 25},
        "odd_images": {"per_class": {}, "images": []},
    }
    files = sorted(str(path) for path in folder.glob("Split-*/*.gz"))
    return label_audit.AuditInput(files, NAMES, ingest)


@pytest.mark.slow
def test_every_image_is_scored_once_out_of_sample_and_reported_as_the_health_report(tmp_path):
    given = write_dataset(tmp_path / "examples")
    data = audit_input(tmp_path / "examples")
    report_dir = tmp_path / "report"

    health = label_audit.run_audit(runlocal(), data, 3, str(report_dir))

    scores = evaluation_report.read_scores(str(report_dir))
    assert sorted(scores.source_paths) == sorted(given)  # every image, exactly once
    assert [NAMES[label] for label in scores.labels] == [given[p] for p in scores.source_paths]
    assert scores.probabilities.shape == (len(given), len(NAMES))
    np.testing.assert_allclose(scores.probabilities.sum(axis=1), 1.0, rtol=1e-5)
    assert sum(health["audit"]["images_per_fold"]) == len(given)
    assert len(health["audit"]["held_out_accuracy"]) == 3
    assert health["audit"]["method"] == "training"

    # The component's shape, every image counted as checked; the file holds the same.
    assert data_health.read_health(str(report_dir)) == health
    assert data_health.counts(health)["eval_images_checked"] == len(given)
    assert health["near_duplicates"]["members"] == [TWINS]
    for issue in health["label_issues"]:
        assert issue["path"] in given and issue["given"] == given[issue["path"]]
        assert issue["predicted"] in NAMES and 0.0 <= issue["confidence"] <= 1.0
    kept = {data_health.HEALTH_FILE, evaluation_report.SCORES_FILE}
    assert set(os.listdir(report_dir)) == kept  # the folds' shards and models are gone


@pytest.mark.slow
def test_the_embedding_audit_scores_every_image_once_and_names_the_flipped_labels(tmp_path):
    given = write_dataset(tmp_path / "examples")
    data = audit_input(tmp_path / "examples")
    report_dir = tmp_path / "report"

    health = label_audit.run_embedding_audit(data, 3, str(report_dir), image_size=64)

    scores = evaluation_report.read_scores(str(report_dir))
    assert sorted(scores.source_paths) == sorted(given)
    assert [NAMES[label] for label in scores.labels] == [given[p] for p in scores.source_paths]
    np.testing.assert_allclose(scores.probabilities.sum(axis=1), 1.0, rtol=1e-6)
    audit = health["audit"]
    assert audit["method"] == "embeddings" and audit["folds"] == 3
    assert sum(audit["images_per_fold"]) == len(given) and not audit["at_chance"]
    fold_of = label_audit.fold_assignment(data, 3)
    # Fold by fold, in the order the folds hold them.
    assert [fold_of[p] for p in scores.source_paths] == sorted(fold_of.values())
    suspects = {issue["path"] for issue in health["label_issues"]}
    assert set(FLIPPED) <= suspects
    assert data_health.read_health(str(report_dir)) == health
    assert set(os.listdir(report_dir)) == {data_health.HEALTH_FILE, evaluation_report.SCORES_FILE}


def test_near_duplicates_share_a_fold(tmp_path):
    write_dataset(tmp_path / "examples")
    fold_of = label_audit.fold_assignment(audit_input(tmp_path / "examples"), 4)
    assert len(fold_of) == 3 * PER_CLASS + 1
    assert fold_of[TWINS[0]] == fold_of[TWINS[1]]


def test_folds_that_leave_less_than_a_batch_to_train_on_are_refused_before_training(tmp_path):
    write_dataset(tmp_path / "examples")
    data = audit_input(tmp_path / "examples")
    config = dataclasses.replace(runlocal(), batch_size=32, shuffle_buffer=320)
    with pytest.raises(FoldError, match="less than one batch of 32"):
        label_audit.run_audit(config, data, 3, str(tmp_path))
    assert not (tmp_path / label_audit.WORK_DIR).exists()
