"""Batch predictions: `imgpipe predict` over a folder of images in one call (scored in its own
process below 20,000 files), against the same call as a Beam job (forced by a Beam option: the
size where Beam would pay) and against `imgpipe predict FILE` run once per file, each a whole
process as a user runs it.

The folder is the embedded dataset (shapes, 96 px JPEGs) with 1% bad files (empty, truncated,
text); the model is the default trainer config's architecture with its initial weights (the
cost of scoring depends on the graph, not on the weights' values). File by file is measured on
a few files and given per file: a process per file pays TensorFlow's import, the model's load
and the job's start each time.

Settings (environment):
  BENCH_PREDICT_IMAGES  images in the folder (default 990), plus 1% bad files
  BENCH_PREDICT_SINGLE  files scored one process each (default 3)
"""

from __future__ import annotations

import os
import resource
import statistics
import subprocess
import sys
import time

TITLE = "`imgpipe predict`: a folder in one call against a process per file"
IMAGES = int(os.environ.get("BENCH_PREDICT_IMAGES", "990"))
SINGLE = int(os.environ.get("BENCH_PREDICT_SINGLE", "3"))
CLASSES = 6


def _folder(workdir: str) -> str:
    """The embedded dataset plus 1% bad files, under workdir."""
    from data_prep.default_dataset import CLASS_NAMES, generate_default_dataset

    folder = os.path.join(workdir, "images")
    generate_default_dataset(folder, images_per_class=max(1, IMAGES // len(CLASS_NAMES)))
    first = os.path.join(folder, CLASS_NAMES[0])
    with open(os.path.join(first, sorted(os.listdir(first))[0]), "rb") as handle:
        jpeg = handle.read()
    bad = os.path.join(folder, "bad")
    os.makedirs(bad, exist_ok=True)
    for index in range(max(3, IMAGES // 100)):
        kind = ("empty.jpg", "cut.jpg", "notes.txt")[index % 3]
        data = (b"", jpeg[: len(jpeg) // 3], b"not an image")[index % 3]
        with open(os.path.join(bad, f"{index}_{kind}"), "wb") as handle:
            handle.write(data)
    return folder


def _model(workdir: str) -> str:
    from components.training import export
    from components.training.model import build_model
    from components.training.preprocessing import Normalization
    from components.training.trainer_config import TrainerConfig

    config = TrainerConfig()
    directory = os.path.join(workdir, "model")
    export.export_model(
        build_model(config, CLASSES),
        directory,
        config.image_size,
        [f"class_{i}" for i in range(CLASSES)],
        Normalization((120.0, 115.0, 100.0), (60.0, 55.0, 50.0)),
    )
    return directory


def _timed(command: list[str], codes: tuple[int, ...]) -> tuple[float, float]:
    """Wall and CPU seconds (user + system) of a command run to its end with one of codes."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.monotonic()
    done = subprocess.run(command, check=False, capture_output=True, text=True)
    wall = time.monotonic() - started
    if done.returncode not in codes:
        raise RuntimeError(f"{' '.join(command)} exited {done.returncode}: {done.stderr[-500:]}")
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu


def run(workdir: str) -> list[dict]:
    from pipeline.predictions_file import read_rows

    workdir = os.path.join(workdir, "predict_bench")
    folder, model = _folder(workdir), _model(workdir)
    files = sorted(os.path.join(root, name) for root, _, names in os.walk(folder) for name in names)
    imgpipe = [sys.executable, "-m", "pipeline.cli"]
    output = os.path.join(workdir, "predictions.csv")
    # Exit status 1: the bad files are rejected (and every file has its row, checked below).
    command = [*imgpipe, "predict", "--model", model, "--data", folder, "--output", output]
    wall, cpu = _timed(command, codes=(1,))
    if len(read_rows(output)) != len(files):
        raise RuntimeError(f"{output} does not hold one row for each of {len(files)} files")
    beam_wall, beam_cpu = _timed([*command, "--", "--runner=DirectRunner"], codes=(1,))
    good = [path for path in files if path.endswith(".jpg") and f"{os.sep}bad{os.sep}" not in path]
    single = [
        _timed([*imgpipe, "predict", "--model", model, path], codes=(0,))
        for path in good[:: max(1, len(good) // SINGLE)][:SINGLE]
    ]
    one_wall = statistics.median(w for w, _ in single)
    one_cpu = statistics.median(c for _, c in single)
    batch_rate = len(files) / wall
    return [
        {
            "name": "predict.batch.files_per_s",
            "value": batch_rate,
            "unit": "files/s",
            "files": len(files),
            "wall_s": wall,
            "cpu_s": cpu,
        },
        {
            "name": "predict.beam_job.files_per_s",
            "value": len(files) / beam_wall,
            "unit": "files/s",
            "files": len(files),
            "wall_s": beam_wall,
            "cpu_s": beam_cpu,
        },
        {"name": "predict.batch_vs_beam_job.speedup", "value": beam_wall / wall, "unit": "x"},
        {
            "name": "predict.file_by_file.files_per_s",
            "value": 1 / one_wall,
            "unit": "files/s",
            "files": 1,
            "wall_s": one_wall,
            "cpu_s": one_cpu,
        },
        {"name": "predict.batch.speedup", "value": batch_rate * one_wall, "unit": "x"},
    ]


def chart(records: list[dict], path: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from benchmarks.charts import label_bars, value_and_ratio

    rates = [r for r in records if r["unit"] == "files/s"]
    figure, axis = plt.subplots(figsize=(6, 4))
    names = ["one call over the folder", "the same as a Beam job", "a process per file"]
    colors = ["#4a7ab5", "#7a9a4a", "#b5654a"]
    bars = axis.bar(names, [r["value"] for r in rates], color=colors)
    label_bars(axis, bars, [value_and_ratio(r) for r in rates])
    axis.set_yscale("log")
    axis.set_ylabel("files/s (log scale)")
    axis.set_title(f"imgpipe predict over {rates[0]['files']} files")
    figure.tight_layout()
    figure.savefig(path, dpi=100)
    plt.close(figure)


def headline(records: list[dict]) -> list[tuple[str, str]]:
    speedup = next(r for r in records if r["name"] == "predict.batch.speedup")
    return [
        (
            "`imgpipe predict` over a folder against a process per file",
            f"{speedup['value']:.0f}x the files/s",
        )
    ]


def meaning(records: list[dict]) -> list[str]:
    batch = next(r for r in records if r["name"] == "predict.batch.files_per_s")
    single = next(r for r in records if r["name"] == "predict.file_by_file.files_per_s")
    return [
        f"One job scores {batch['value']:.0f} files/s over {batch['files']} files; a process "
        f"per file takes {single['wall_s']:.1f} s each (TensorFlow's import, the model's load "
        "and the job's start, every time)."
    ]
