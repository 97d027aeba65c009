"""`imgpipe predict`: files of every format the ingest accepts are answered as the same pixels in a
plain PNG are; a file that is not an image gets the ingest's reason while the others are still
answered; the model folder may be a Pusher destination."""

import io
import shutil

import numpy as np
import pytest
from PIL import Image

from pipeline.cli import main
from pipeline.predict import Failure, Prediction, predict_files, resolve_model_dir
from tests.components.conftest import export_model_artifact
from tests.data_prep import image_files

pytestmark = pytest.mark.slow
LABELS = ("cat", "dog", "emu")


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory):
    root = tmp_path_factory.mktemp("predict_model")
    export_model_artifact(root, LABELS)
    return str(root / "Format-Serving")


@pytest.fixture(scope="module")
def images(tmp_path_factory):
    """The same 8-bit RGB pixels in several formats, plus a grayscale pair and a rotated JPEG."""
    folder = tmp_path_factory.mktemp("images")
    pixels = Image.fromarray(image_files.random_rgb(40, 56, seed=3))
    gray = Image.fromarray(image_files.random_rgb(40, 56, seed=4)[..., 0])
    files = {
        "rgb.png": image_files.encode(pixels, "PNG"),
        "lossless.webp": image_files.encode(pixels, "WEBP", lossless=True),
        "photo.tiff": image_files.encode(pixels, "TIFF"),
        "bitmap.bmp": image_files.encode(pixels, "BMP"),
        "opaque_rgba.png": image_files.encode(pixels.convert("RGBA"), "PNG"),
        "gray.png": image_files.encode(gray, "PNG"),
        "gray_as_rgb.png": image_files.encode(gray.convert("RGB"), "PNG"),
        "rotated.jpg": image_files.exif_rotated_jpeg()[0],
        "notes.txt": b"not an image at all",
    }
    for name, data in files.items():
        (folder / name).write_bytes(data)
    return folder


def _probabilities(result: Prediction) -> np.ndarray:
    by_name = dict(result.top)
    return np.array([by_name[name] for name in LABELS])


def test_every_accepted_format_is_answered_as_the_same_pixels_in_png(model_dir, images):
    names = ["rgb.png", "lossless.webp", "photo.tiff", "bitmap.bmp", "opaque_rgba.png"]
    results = predict_files(model_dir, [str(images / name) for name in names], top_k=3)

    assert all(isinstance(result, Prediction) for result in results)
    reference = _probabilities(results[0])
    for result in results[1:]:
        np.testing.assert_allclose(_probabilities(result), reference, atol=1e-6)
    gray, gray_rgb = predict_files(
        model_dir, [str(images / "gray.png"), str(images / "gray_as_rgb.png")], top_k=3
    )
    np.testing.assert_allclose(_probabilities(gray), _probabilities(gray_rgb), atol=1e-6)
    # Different pixels answer differently, so a format handled wrongly would show above.
    assert np.abs(_probabilities(gray) - reference).max() > 1e-4


def test_top_k_is_sorted_and_capped_by_k(model_dir, images):
    [result] = predict_files(model_dir, [str(images / "rotated.jpg")], top_k=2)

    assert len(result.top) == 2
    assert result.top[0][1] >= result.top[1][1]
    assert {name for name, _ in result.top} <= set(LABELS)


def test_a_file_that_is_not_an_image_fails_alone(model_dir, images, capsys):
    files = [str(images / "notes.txt"), str(images / "rgb.png"), str(images / "missing.png")]

    code = main(["predict", "--model", model_dir, "--top-k", "1", *files])

    out, err = capsys.readouterr()
    assert code == 1
    assert f"{images / 'notes.txt'}: not_an_image:" in err
    assert f"{images / 'missing.png'}: unreadable:" in err
    [answer] = out.splitlines()
    assert answer.startswith(f"{images / 'rgb.png'}: ") and answer.split()[-2] in LABELS
    results = predict_files(model_dir, files, top_k=1)
    assert [type(result) for result in results] == [Failure, Prediction, Failure]


def test_a_pusher_destination_resolves_to_its_newest_version(model_dir, tmp_path, capsys):
    for version in ("1700000000", "1800000000"):
        shutil.copytree(model_dir, tmp_path / version)
    (tmp_path / "notes").mkdir()
    assert resolve_model_dir(str(tmp_path)) == str(tmp_path / "1800000000")

    assert main(["predict", "--model", str(tmp_path / "notes"), "x.png"]) == 2
    assert "holds no SavedModel" in capsys.readouterr().err


def test_encoded_png_bytes_round_trip(images):
    """The fixture's PNG really holds the pixels the other formats hold (guards the test)."""
    png = Image.open(io.BytesIO((images / "rgb.png").read_bytes()))
    webp = Image.open(io.BytesIO((images / "lossless.webp").read_bytes()))
    np.testing.assert_array_equal(np.asarray(png), np.asarray(webp.convert("RGB")))
