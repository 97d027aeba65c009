"""The embedded default dataset must be complete, decodable, reproducible and cheap to re-run."""

import json
import os

import numpy as np
import pytest
from PIL import Image

from data_prep import default_dataset

SMALL = {"images_per_class": 3, "image_size": 48}


def _files(root):
    """Relative path -> bytes for every file under root."""
    out = {}
    for directory, _, names in os.walk(root):
        for name in names:
            path = os.path.join(directory, name)
            with open(path, "rb") as f:
                out[os.path.relpath(path, root)] = f.read()
    return out


def test_class_names_are_sorted_and_enough():
    assert len(default_dataset.CLASS_NAMES) >= 6
    assert list(default_dataset.CLASS_NAMES) == sorted(set(default_dataset.CLASS_NAMES))


def test_counts_and_layout(tmp_path):
    counts = default_dataset.generate_default_dataset(str(tmp_path), **SMALL)

    assert counts == {name: 3 for name in default_dataset.CLASS_NAMES}
    assert sorted(os.listdir(tmp_path)) == sorted(
        [*default_dataset.CLASS_NAMES, default_dataset.INFO_FILE]
    )
    for name in default_dataset.CLASS_NAMES:
        expected = [f"{name}_{i:04d}.jpg" for i in range(3)]
        assert sorted(os.listdir(tmp_path / name)) == expected
    info = json.loads((tmp_path / default_dataset.INFO_FILE).read_text())
    assert info["counts"] == counts
    assert (info["images_per_class"], info["image_size"], info["seed"]) == (3, 48, 0)


def test_every_file_is_an_rgb_jpeg_of_the_requested_size(tmp_path):
    default_dataset.generate_default_dataset(str(tmp_path), images_per_class=2, image_size=40)

    for name in default_dataset.CLASS_NAMES:
        for file_name in os.listdir(tmp_path / name):
            with Image.open(tmp_path / name / file_name) as image:
                assert image.format == "JPEG"
                assert image.mode == "RGB"
                assert image.size == (40, 40)
                image.load()


def test_same_seed_gives_byte_identical_files(tmp_path):
    default_dataset.generate_default_dataset(str(tmp_path / "a"), **SMALL)
    default_dataset.generate_default_dataset(str(tmp_path / "b"), **SMALL)

    assert _files(tmp_path / "a") == _files(tmp_path / "b")


def test_different_seeds_give_different_images(tmp_path):
    default_dataset.generate_default_dataset(str(tmp_path / "a"), seed=0, **SMALL)
    default_dataset.generate_default_dataset(str(tmp_path / "b"), seed=1, **SMALL)

    a, b = _files(tmp_path / "a"), _files(tmp_path / "b")
    images = [path for path in a if path.endswith(".jpg")]
    assert all(a[path] != b[path] for path in images)


def test_all_images_are_distinct(tmp_path):
    """Ingest drops duplicate bytes, so every generated image must be unique."""
    default_dataset.generate_default_dataset(str(tmp_path), **SMALL)

    images = [data for path, data in _files(tmp_path).items() if path.endswith(".jpg")]
    assert len(set(images)) == len(images) == 3 * len(default_dataset.CLASS_NAMES)


def test_second_call_is_a_no_op(tmp_path):
    default_dataset.generate_default_dataset(str(tmp_path), **SMALL)
    paths = [os.path.join(d, n) for d, _, names in os.walk(tmp_path) for n in names]
    before = {p: (os.stat(p).st_ino, os.stat(p).st_mtime_ns) for p in paths}

    counts = default_dataset.generate_default_dataset(str(tmp_path), **SMALL)

    assert counts == {name: 3 for name in default_dataset.CLASS_NAMES}
    after = {p: (os.stat(p).st_ino, os.stat(p).st_mtime_ns) for p in paths}
    assert after == before


def test_missing_file_or_changed_parameters_regenerate(tmp_path):
    default_dataset.generate_default_dataset(str(tmp_path), images_per_class=4, image_size=48)
    os.remove(tmp_path / "star" / "star_0001.jpg")
    (tmp_path / "ring" / ".ring_0007.jpg.tmp").write_bytes(b"\xff\xd8 half a jpeg")  # killed run

    counts = default_dataset.generate_default_dataset(str(tmp_path), **SMALL)

    assert counts["star"] == 3
    for name in default_dataset.CLASS_NAMES:
        # The smaller run replaces the larger one, its now-stale fourth image and temp files.
        assert sorted(os.listdir(tmp_path / name)) == [f"{name}_{i:04d}.jpg" for i in range(3)]
    info = json.loads((tmp_path / default_dataset.INFO_FILE).read_text())
    assert info["images_per_class"] == 3


def test_no_temporary_files_are_left(tmp_path):
    default_dataset.generate_default_dataset(str(tmp_path), **SMALL)

    leftovers = [n for _, _, names in os.walk(tmp_path) for n in names if n.endswith(".tmp")]
    assert leftovers == []


def test_class_shapes_differ():
    """Same placement, different class: the masks must differ substantially (IoU well below 1)."""
    masks = {}
    for name in default_dataset.CLASS_NAMES:
        rng = np.random.default_rng(0)
        mask = default_dataset._shape_mask(name, 64, (32.0, 32.0), 24.0, 0.3, rng) > 127
        assert mask.any()
        masks[name] = mask
    for i, first in enumerate(default_dataset.CLASS_NAMES):
        for second in default_dataset.CLASS_NAMES[i + 1 :]:
            a, b = masks[first], masks[second]
            iou = (a & b).sum() / (a | b).sum()
            assert iou < 0.85, (first, second, iou)


@pytest.mark.parametrize(
    ("kwargs", "argument"),
    [
        ({"images_per_class": 0}, "images_per_class"),
        ({"image_size": 31}, "image_size"),
        ({"seed": -1}, "seed"),
    ],
)
def test_bad_arguments_raise_value_error(tmp_path, kwargs, argument):
    with pytest.raises(ValueError, match=argument):
        default_dataset.generate_default_dataset(str(tmp_path / "out"), **kwargs)
    assert not (tmp_path / "out").exists()


def test_drawing_runs_beside_the_block_and_completes_on_exit(tmp_path):
    info_path = tmp_path / "beside" / default_dataset.INFO_FILE
    with default_dataset.drawing_default_dataset(str(tmp_path / "beside"), **SMALL) as counts:
        assert not info_path.exists()  # not complete until the drawing is waited for
    assert counts == {name: 3 for name in default_dataset.CLASS_NAMES}
    assert json.loads(info_path.read_text())["counts"] == counts
    default_dataset.generate_default_dataset(str(tmp_path / "at_once"), **SMALL)
    assert _files(tmp_path / "beside") == _files(tmp_path / "at_once")


def test_a_block_that_raises_leaves_the_dataset_incomplete(tmp_path):
    with pytest.raises(KeyboardInterrupt):
        with default_dataset.drawing_default_dataset(str(tmp_path), **SMALL):
            raise KeyboardInterrupt
    assert not (tmp_path / default_dataset.INFO_FILE).exists()
    counts = default_dataset.generate_default_dataset(str(tmp_path), **SMALL)  # drawn again
    assert sum(counts.values()) == 3 * len(default_dataset.CLASS_NAMES)
    assert (tmp_path / default_dataset.INFO_FILE).exists()
