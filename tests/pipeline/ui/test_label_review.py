"""The label review file and the corrected manifest, on labelled JPEG files in class folders."""

import json
import os

import pytest

from data_prep.reading.sources import read_manifest
from pipeline.ui import label_review
from tests.pipeline.tiny_pipeline import write_images


def test_a_mark_is_kept_per_run_and_a_later_one_replaces_it(tmp_path):
    review = label_review.Review(str(tmp_path / "store" / label_review.REVIEW_FILE))
    os.makedirs(tmp_path / "store")
    review.mark("run-1", str(tmp_path / "images"), "cat/3.jpg", "confirmed", "dog")
    review.mark("run-1", str(tmp_path / "images"), "cat/4.jpg", "unsure", "owl")
    review.mark("run-1", str(tmp_path / "images"), "cat/3.jpg", "wrong", "dog")
    assert review.marks("run-1") == {
        "cat/3.jpg": {"verdict": "wrong", "label": "dog"},
        "cat/4.jpg": {"verdict": "unsure", "label": "owl"},
    }
    assert review.marks("run-2") == {}
    assert os.listdir(tmp_path / "store") == [label_review.REVIEW_FILE]  # no temporary left
    with pytest.raises(label_review.ReviewError, match="not one of confirmed, wrong, unsure"):
        review.mark("run-1", "", "cat/3.jpg", "maybe", "dog")


def test_a_link_at_the_review_file_is_replaced_never_written_through(tmp_path):
    elsewhere = tmp_path / "someone-elses.json"
    elsewhere.write_text("{}")
    (tmp_path / label_review.REVIEW_FILE).symlink_to(elsewhere)
    review = label_review.Review(str(tmp_path / label_review.REVIEW_FILE))
    review.mark("run-1", "", "cat/3.jpg", "confirmed", "dog")
    assert elsewhere.read_text() == "{}"
    assert not os.path.islink(review.path)
    assert json.loads(open(review.path).read())["run-1"]["cat/3.jpg"]["verdict"] == "confirmed"


def test_a_review_file_inside_the_data_is_refused(tmp_path):
    images = write_images(tmp_path / "images")
    review = label_review.Review(str(images / label_review.REVIEW_FILE))
    with pytest.raises(label_review.ReviewError, match="inside the data"):
        review.mark("run-1", str(images), "cat/3.jpg", "confirmed", "dog")
    assert not (images / label_review.REVIEW_FILE).exists()
    manifest = images / "listed.csv"  # a manifest's folder is the data too
    with pytest.raises(label_review.ReviewError, match="inside the data"):
        review.mark("run-1", str(manifest), "cat/3.jpg", "confirmed", "dog")


def test_the_corrected_manifest_relabels_the_confirmed_suspects_only(tmp_path):
    images = write_images(tmp_path / "images")
    (images / "stray.jpg").write_bytes((images / "cat" / "0.jpg").read_bytes())  # no class
    marks = {
        "cat/3.jpg": {"verdict": "confirmed", "label": "dog"},
        "dog/1.jpg": {"verdict": "wrong", "label": "owl"},
        "owl/2.jpg": {"verdict": "unsure", "label": "cat"},
    }
    manifest = tmp_path / "elsewhere" / "corrected.csv"
    manifest.parent.mkdir()
    manifest.write_text(label_review.corrected_manifest(str(images), marks))
    sources = read_manifest(str(manifest))  # as `imgpipe run --data corrected.csv` reads it
    labels = {os.path.relpath(source.path, images): source.label for source in sources}
    assert len(labels) == 30 and "stray.jpg" not in labels
    assert labels["cat/3.jpg"] == "dog"
    assert (labels["dog/1.jpg"], labels["owl/2.jpg"], labels["cat/4.jpg"]) == ("dog", "owl", "cat")
    assert all(os.path.isabs(source.path) for source in sources)
    with pytest.raises(label_review.ReviewError, match="cannot be listed again"):
        label_review.corrected_manifest(str(tmp_path / "gone"), marks)
