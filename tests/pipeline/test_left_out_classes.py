"""A class folder with no usable image (a README, or only corrupt files) is left out: the whole
pipeline trains, evaluates and pushes a model for the real classes, and says what it left out."""

import pytest

from pipeline.local_runner import run_local
from tests.data_prep import image_files
from tests.pipeline.expected import COMPONENTS
from tests.pipeline.tiny_pipeline import LABELS, tiny_config, write_images

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def summary(tmp_path_factory):
    root = tmp_path_factory.mktemp("left_out")
    images = write_images(root / "images")
    (images / "docs").mkdir()
    (images / "docs" / "README.txt").write_text("Photos of cats, dogs and owls.\n")
    (images / "broken").mkdir()
    (images / "broken" / "cut.jpg").write_bytes(image_files.jpeg(seed=900, height=64)[:-400])
    (images / "broken" / "garbage.jpg").write_bytes(b"\xff\xd8\xff\xe0 not really a JPEG")
    return run_local(tiny_config(images, root / "build"))


def test_the_pipeline_pushes_a_model_for_the_real_classes(summary):
    assert {c.node: c.state for c in summary.components} == {name: "ran" for name in COMPONENTS}
    assert summary.pushed_to is not None
    assert summary.class_names == LABELS
    # The evaluation's classes are the label map's.
    assert [row["class"] for row in summary.evaluation["per_class"]] == list(LABELS)


def test_the_summary_names_the_classes_left_out(summary):
    assert summary.classes_left_out == ("broken", "docs")
    assert summary.ingest_counts == {"found": 33, "accepted": 30, "rejected": 2, "ignored": 1}
