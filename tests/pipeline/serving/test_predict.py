"""`imgpipe predict`: files of every format the ingest accepts are answered as the same pixels in a
plain PNG are; folders are walked and manifests read; a file the ingest would reject or ignore gets
its status and reason while the others are still answered; one row per file in CSV or JSON lines;
low-confidence answers are marked; the model folder may be a Pusher destination."""

import csv
import hashlib
import io
import json
import os
import shutil
import subprocess
import sys

import numpy as np
import pytest
from PIL import Image

from pipeline.cli import main
from pipeline.predictions_file import PredictionRow, read_rows
from pipeline.serving import predict as predict_module
from pipeline.serving.predict import predict, resolve_model_dir
from pipeline.serving.scoring import PredictSettings
from tests.components.conftest import export_model_artifact
from tests.data_prep import image_files

pytestmark = pytest.mark.slow
LABELS = ("cat", "dog", "emu")
REPOSITORY = os.path.dirname(
    os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
)


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
    }
    for name, data in files.items():
        (folder / name).write_bytes(data)
    return folder


@pytest.fixture(scope="module")
def album(tmp_path_factory):
    """A folder tree of new photos at several depths, with an empty and a truncated JPEG and a
    text file, and a manifest (without labels) of two of them beside it."""
    root = tmp_path_factory.mktemp("album")
    for index, name in enumerate(["top.jpg", "trip/beach.jpg", "trip/day2/boat.png"]):
        (root / "photos" / name).parent.mkdir(parents=True, exist_ok=True)
        encode = image_files.png if name.endswith(".png") else image_files.jpeg
        (root / "photos" / name).write_bytes(encode(seed=50 + index))
    (root / "photos" / "trip" / "empty.jpg").write_bytes(b"")
    jpeg = image_files.jpeg(seed=60)
    (root / "photos" / "cut.jpg").write_bytes(jpeg[: len(jpeg) // 2])
    (root / "photos" / "trip" / "notes.txt").write_text("not an image")
    (root / "list.csv").write_text("path\nphotos/top.jpg\nphotos/trip/day2/boat.png\n")
    return root


def _probabilities(row: PredictionRow) -> np.ndarray:
    by_name = dict(row.top_k)
    return np.array([by_name[name] for name in LABELS])


def _shown(path) -> str:
    """The path as the console shows it (relative when below the current folder)."""
    return PredictionRow(str(path), "scored").shown_file


def _by_name(rows: list[PredictionRow]) -> dict[str, PredictionRow]:
    return {row.file.rsplit("/", 1)[-1]: row for row in rows}


def test_every_accepted_format_is_answered_as_the_same_pixels_in_png(model_dir, images):
    names = ["rgb.png", "lossless.webp", "photo.tiff", "bitmap.bmp", "opaque_rgba.png"]
    gray_names = ["gray.png", "gray_as_rgb.png"]
    files = [str(images / name) for name in names + gray_names]

    rows = _by_name(predict(files, model_dir, PredictSettings(top_k=3)))

    assert all(row.status == "scored" for row in rows.values())
    reference = _probabilities(rows["rgb.png"])
    for name in names[1:]:
        np.testing.assert_allclose(_probabilities(rows[name]), reference, atol=1e-6)
    gray, gray_rgb = (_probabilities(rows[name]) for name in gray_names)
    np.testing.assert_allclose(gray, gray_rgb, atol=1e-6)
    # Different pixels answer differently, so a format handled wrongly would show above.
    assert np.abs(gray - reference).max() > 1e-4


def test_top_k_is_sorted_and_capped_by_k(model_dir, images):
    [row] = predict([str(images / "rotated.jpg")], model_dir, PredictSettings(top_k=2))

    assert len(row.top_k) == 2
    assert row.top_k[0][1] >= row.top_k[1][1]
    assert row.top_class == row.top_k[0][0] and {name for name, _ in row.top_k} <= set(LABELS)


def test_folders_are_walked_and_bad_files_get_the_ingest_reason(model_dir, album):
    rows = predict([str(album / "photos")], model_dir, PredictSettings())

    found = {row.file: row for row in rows}
    photos = album / "photos"
    assert set(found) == {
        str(photos / name)
        for name in [
            "top.jpg",
            "cut.jpg",
            "trip/beach.jpg",
            "trip/empty.jpg",
            "trip/notes.txt",
            "trip/day2/boat.png",
        ]
    }
    assert found[str(photos / "trip/day2/boat.png")].status == "scored"
    assert (
        found[str(photos / "trip/empty.jpg")].status,
        found[str(photos / "trip/empty.jpg")].reason,
    ) == ("rejected", "empty")
    assert found[str(photos / "cut.jpg")].reason == "truncated"
    assert found[str(photos / "trip/notes.txt")].status == "ignored"
    assert [row.file for row in rows] == sorted(found)


def test_a_manifest_without_labels_names_the_files(model_dir, album):
    rows = predict([str(album / "list.csv")], model_dir, PredictSettings())

    assert [row.file for row in rows] == [
        str(album / "photos" / "top.jpg"),
        str(album / "photos" / "trip" / "day2" / "boat.png"),
    ]
    assert all(row.status == "scored" for row in rows)


@pytest.mark.parametrize("suffix", [".csv", ".jsonl"])
def test_output_has_one_row_per_file_and_marks_low_confidence(
    model_dir, album, tmp_path, capsys, suffix
):
    output = tmp_path / f"predictions{suffix}"
    photos = album / "photos"
    command = ["predict", "--model", model_dir, "--data", str(photos), "--output", str(output)]

    code = main([*command, "--min-confidence", "1", "--build-dir", str(tmp_path / "none")])

    out, err = capsys.readouterr()
    assert code == 1  # rejected files
    assert f"{_shown(photos / 'trip' / 'empty.jpg')}: rejected: empty: file is empty" in err
    assert f"{_shown(photos / 'trip' / 'notes.txt')}: ignored: not an image file" in err
    assert "not recorded in ML Metadata" in err  # no store under --build-dir
    assert "error" not in err
    assert out.startswith(
        f"{output}: 6 files, 3 scored (3 below 1 confidence), 2 rejected, 1 ignored"
    )
    text = output.read_text()
    raw = (
        list(csv.DictReader(io.StringIO(text)))
        if suffix == ".csv"
        else [json.loads(line) for line in text.splitlines()]
    )
    assert len(raw) == 6
    rows = read_rows(str(output))
    scored = [row for row in rows if row.status == "scored"]
    assert len(scored) == 3 and all(row.low_confidence for row in scored)
    assert all(row.model_version == model_dir and len(row.top_k) == 3 for row in scored)
    assert all(len(row.sha256) == 64 for row in scored)

    main([*command, "--min-confidence", "0", "--build-dir", str(tmp_path / "none")])
    assert not any(row.low_confidence for row in read_rows(str(output)))


def test_the_table_names_each_scored_file_and_bad_files_go_to_stderr(model_dir, album, capsys):
    photos = album / "photos"
    files = [
        str(photos / "trip" / "notes.txt"),
        str(photos / "top.jpg"),
        str(photos / "missing.png"),
    ]

    code = main(["predict", "--model", model_dir, "--top-k", "1", *files])

    out, err = capsys.readouterr()
    assert code == 1
    assert f"{_shown(photos / 'missing.png')}: rejected: unreadable:" in err
    header, line = out.splitlines()
    assert header.split()[:3] == ["file", "class", "prob"]
    assert line.startswith(_shown(photos / "top.jpg")) and line.split()[1] in LABELS


def test_a_pusher_destination_resolves_to_its_newest_version(model_dir, tmp_path, capsys):
    for version in ("1700000000", "1800000000"):
        shutil.copytree(model_dir, tmp_path / version)
    (tmp_path / "notes").mkdir()
    assert resolve_model_dir(str(tmp_path)) == str(tmp_path / "1800000000")

    assert main(["predict", "--model", str(tmp_path / "notes"), "x.png"]) == 2
    assert "holds no SavedModel" in capsys.readouterr().err


def test_bad_settings_are_refused_before_any_work(model_dir, capsys):
    assert main(["predict", "--model", model_dir, "--min-confidence", "2", "x.png"]) == 2
    assert "--min-confidence" in capsys.readouterr().err
    assert main(["predict", "--model", model_dir, "--output", "p.txt", "x.png"]) == 2
    assert "--output 'p.txt' must end with .csv or .jsonl" in capsys.readouterr().err


def test_encoded_png_bytes_round_trip(images):
    """The fixture's PNG really holds the pixels the other formats hold (guards the test)."""
    png = Image.open(io.BytesIO((images / "rgb.png").read_bytes()))
    webp = Image.open(io.BytesIO((images / "lossless.webp").read_bytes()))
    np.testing.assert_array_equal(np.asarray(png), np.asarray(webp.convert("RGB")))


def test_a_named_pipe_is_refused_without_blocking(model_dir, tmp_path):
    os.mkfifo(tmp_path / "pipe.jpg")
    (tmp_path / "folder").mkdir()
    os.mkfifo(tmp_path / "folder" / "pipe.png")

    rows = predict(
        [str(tmp_path / "pipe.jpg"), str(tmp_path / "folder")], model_dir, PredictSettings()
    )

    assert [(row.status, row.reason) for row in rows] == [("rejected", "unreadable")] * 2
    assert all("regular file" in row.detail for row in rows)


def test_explain_writes_an_overlay_of_each_scored_image(model_dir, album, tmp_path, capsys):
    folder = tmp_path / "why"
    folder.mkdir()
    victim = tmp_path / "victim"
    victim.write_bytes(b"theirs")
    digest = hashlib.sha256((album / "photos" / "top.jpg").read_bytes()).hexdigest()
    os.symlink(victim, folder / f"top-{digest[:8]}.png")  # planted where an overlay goes

    code = main(["predict", "--model", model_dir, str(album / "photos"), "--explain", str(folder)])

    out = capsys.readouterr().out
    overlays = sorted(path.name for path in folder.iterdir() if not path.is_symlink())
    assert code == 1  # the album's bad files
    assert f"Grad-CAM overlays: 2 in {folder} (1 already there, kept)" in out
    assert victim.read_bytes() == b"theirs"
    assert [name.rsplit("-", 1)[0] for name in overlays] == ["beach", "boat"]
    assert all(Image.open(folder / name).format == "PNG" for name in overlays)


@pytest.fixture(scope="module")
def labelled(tmp_path_factory):
    """Class folders named for the model's classes (one an unknown class), and a manifest with
    labels of the same files."""
    root = tmp_path_factory.mktemp("labelled")
    for index, label in enumerate(["cat", "cat", "dog", "emu", "owl"]):
        (root / "folders" / label).mkdir(parents=True, exist_ok=True)
        (root / "folders" / label / f"{index}.jpg").write_bytes(image_files.jpeg(seed=70 + index))
    lines = [
        f"folders/{path.parent.name}/{path.name},{path.parent.name}"
        for path in sorted((root / "folders").glob("*/*.jpg"))
    ]
    (root / "labels.csv").write_text("path,label\n" + "\n".join(lines) + "\n")
    return root


@pytest.mark.parametrize("given", ["folders", "labels.csv"])
def test_labelled_files_are_scored_against_their_labels(
    model_dir, labelled, tmp_path, capsys, given
):
    output = tmp_path / "predictions.csv"
    command = ["predict", "--model", model_dir, "--data", str(labelled / given)]

    code = main([*command, "--output", str(output), "--build-dir", str(tmp_path / "none")])

    out, _ = capsys.readouterr()
    assert code == 0
    raw = list(csv.DictReader(io.StringIO(output.read_text())))
    assert [row["label"] for row in raw] == ["cat", "cat", "dog", "emu", "owl"]
    assert all(row["correct"] == str(row["top_class"] == row["label"]).lower() for row in raw)
    right = sum(row["correct"] == "true" for row in raw)
    assert f"labelled: accuracy {right / 5:.4f} ({right} of 5 scored files with a label)" in out
    assert "labels that are no class of the model (counted wrong): owl" in out
    assert "per class (precision / recall; - where undefined):" in out
    assert "most confused (true -> predicted): " in out


def test_folders_named_for_no_class_are_no_labels(model_dir, album, capsys):
    rows = predict([str(album / "photos")], model_dir, PredictSettings())
    assert all(row.label == "" and row.correct is None for row in rows)


def test_a_bare_output_name_is_a_file_in_this_folder(model_dir, album, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    code = main(["predict", "--model", model_dir, "--output", "predictions.csv", str(album)])
    assert code == 1  # the album's bad files
    rows = read_rows(str(tmp_path / "predictions.csv"))
    assert len(rows) == 7 and sorted(os.listdir(tmp_path)) == ["predictions.csv"]


def _answers(rows: list[PredictionRow]) -> list[tuple]:
    return [(row.file, row.status, row.reason, row.sha256, row.top_class) for row in rows]


def test_in_process_and_beam_write_the_same_rows(model_dir, album, images, tmp_path):
    """A handful of files is scored without Beam; any Beam option runs the Beam job."""
    inputs = [str(album / "photos"), str(images)]
    settings = PredictSettings(top_k=3)

    direct = predict(inputs, model_dir, settings, str(tmp_path / "direct.jsonl"))
    beam = predict(
        inputs, model_dir, settings, str(tmp_path / "beam.jsonl"), ("--runner=DirectRunner",)
    )

    assert _answers(direct) == _answers(beam) and len(direct) == 14
    scored = [(a, b) for a, b in zip(direct, beam, strict=True) if a.status == "scored"]
    assert len(scored) == 11
    for ours, theirs in scored:
        np.testing.assert_allclose(_probabilities(ours), _probabilities(theirs), atol=1e-5)


@pytest.mark.parametrize("beam_args", [(), ("--runner=DirectRunner",)], ids=["direct", "beam"])
def test_a_batch_the_model_fails_on_is_reported_per_file(model_dir, album, monkeypatch, beam_args):
    def fails(self, images):
        raise ValueError("the signature refused the batch\nsecond line")

    monkeypatch.setattr(predict_module.ImageModel, "probabilities", fails)

    rows = predict([str(album / "photos")], model_dir, PredictSettings(), beam_args=beam_args)

    failed = [row for row in rows if row.reason == "inference_failed"]
    assert [row.file.rsplit("/", 1)[-1] for row in failed] == ["top.jpg", "beach.jpg", "boat.png"]
    assert {row.detail for row in failed} == {"ValueError: the signature refused the batch"}
    assert all(len(row.sha256) == 64 and row.status == "rejected" for row in failed)


def test_a_handful_of_files_is_scored_without_importing_beam(model_dir, images, tmp_path):
    """What makes `imgpipe predict` on a few files answer in seconds: Beam is never imported."""
    script = (
        "import sys\n"
        "from pipeline.cli import main\n"
        f"code = main(['predict', '--model', {model_dir!r}, {str(images / 'rgb.png')!r}])\n"
        "print('beam imported' if 'apache_beam' in sys.modules else 'no beam', code)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": REPOSITORY, "TF_USE_LEGACY_KERAS": "1"},
        check=False,
    )

    assert done.stdout.splitlines()[-1] == "no beam 0", done.stderr


def test_beam_takes_over_where_the_direct_runner_would_start_worker_processes():
    from data_prep.runtime import running_mode

    assert predict_module.BEAM_FROM_FILES == running_mode.IN_PROCESS_MAX_FILES
