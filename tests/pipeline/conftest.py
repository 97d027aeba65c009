"""The two-run store the lineage, UI and browser tests share, built once per session by the tiny
pipeline (a pipeline run is the suite's most expensive step): the images hold a duplicate (its
bytes decode: a thumbnail), an empty and a truncated file (no thumbnail) and a text file
(ignored); the second run changes the learning rate."""

import pytest

from tests.data_prep import image_files
from tests.pipeline.tiny_pipeline import IMAGES_PER_CLASS, LABELS, TwoRuns, run_twice, write_images

DUPLICATE, EMPTY, TRUNCATED, IGNORED = "cat/copy.jpg", "dog/empty.jpg", "owl/cut.jpg", "notes.txt"
ACCEPTED = IMAGES_PER_CLASS * len(LABELS)  # the three messy files are rejected, one ignored
FOUND = ACCEPTED + 4


@pytest.fixture(scope="session")
def two_runs(tmp_path_factory) -> TwoRuns:
    root = tmp_path_factory.mktemp("two_runs")
    images = write_images(root / "images")
    (images / DUPLICATE).write_bytes((images / "cat" / "0.jpg").read_bytes())
    (images / EMPTY).write_bytes(b"")
    jpeg = image_files.jpeg(seed=999)
    (images / TRUNCATED).write_bytes(jpeg[: len(jpeg) // 2])
    (images / "cat" / IGNORED).write_text("not an image")
    return run_twice(images, root / "build")
