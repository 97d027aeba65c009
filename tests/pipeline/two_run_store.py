"""The two-run store the lineage, UI, browser and local-cluster tests share (the session
fixture `two_runs` in tests/conftest.py), built once per session with `imgpipe run` (a pipeline
run is the suite's most expensive step): the images hold a duplicate (its bytes decode: a
thumbnail), an empty and a truncated file (no thumbnail) and a text file (ignored); the second
run changes the learning rate."""

import pathlib

from tests.data_prep import image_files
from tests.pipeline.tiny_pipeline import IMAGES_PER_CLASS, LABELS, TwoRuns, run_twice, write_images

DUPLICATE, EMPTY, TRUNCATED, IGNORED = "cat/copy.jpg", "dog/empty.jpg", "owl/cut.jpg", "notes.txt"
ACCEPTED = IMAGES_PER_CLASS * len(LABELS)  # the three messy files are rejected, one ignored
FOUND = ACCEPTED + 4


def build(root: pathlib.Path) -> TwoRuns:
    """The messy images under root/images and the two runs' store under root/build."""
    images = write_images(root / "images")
    (images / DUPLICATE).write_bytes((images / "cat" / "0.jpg").read_bytes())
    (images / EMPTY).write_bytes(b"")
    jpeg = image_files.jpeg(seed=999)
    (images / TRUNCATED).write_bytes(jpeg[: len(jpeg) // 2])
    (images / "cat" / IGNORED).write_text("not an image")
    return run_twice(images, root / "build")
