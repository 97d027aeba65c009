"""Benchmark parts run end to end on tiny settings, through `python -m benchmarks.run` as
`make bench PARTS=...` runs them, so a part that no longer runs is seen here and not on the
next full benchmark. What they measure at this size means nothing; that they run, chart and
render does."""

import json
import math
import os
import subprocess
import sys

import pytest

from benchmarks.run import PARTS

# Each part's BENCH_* settings that make it take seconds to a minute or two.
TRAINER = {"BENCH_TRAINER_EPOCHS": "1", "BENCH_TRAINER_IMAGES_PER_CLASS": "30"}
TINY = {
    "peer": {
        "BENCH_PEER_DATASETS": "photos",
        "BENCH_PEER_IMAGES": "300",
        "BENCH_PEER_ROUNDS": "1",
        "BENCH_PEER_EPOCHS": "1",
        "BENCH_PEER_LIMIT_SIZE": "64",
    },
    "pipeline": {"BENCH_PIPELINE_IMAGES": "200 300", "BENCH_PIPELINE_EPOCHS": "1"},
    "input_limit": {"BENCH_INPUT_IMAGES": "96", "BENCH_RUNS": "1"},
    "input_ablation": {"BENCH_INPUT_IMAGES": "192", "BENCH_RUNS": "1"},
    "input_overlap": {"BENCH_INPUT_IMAGES": "192", "BENCH_RUNS": "1"},
    "input_real_vs_synthetic": {"BENCH_INPUT_IMAGES": "192", "BENCH_RUNS": "1"},
    "training": {
        "BENCH_TRAINING_STEPS": "8",
        "BENCH_TRAINING_WARMUP": "8",
        "BENCH_TRAINING_REPEATS": "1",
    },
    "precision": {**TRAINER, "BENCH_PRECISION_SEEDS": "0"},
    "regularization": TRAINER,
    "warm_start": {**TRAINER, "BENCH_WARM_START_EPOCHS": "1"},
    "ingest": {"BENCH_INGEST_IMAGES": "150 300", "BENCH_INGEST_RUNS": "1"},
    "health": {
        "BENCH_HEALTH_SCANS": "300",
        "BENCH_HEALTH_PHOTOS": "40",
        "BENCH_HEALTH_COST_ROUNDS": "1",
    },
    "audit": {
        "BENCH_AUDIT_FOLDS": "2",
        "BENCH_AUDIT_DIGITS_PER_CLASS": "12",
        "BENCH_AUDIT_PHOTOS": "100",
        "BENCH_AUDIT_PRESET": "runlocal",
    },
    "serving": {"BENCH_SERVING_RUNS": "1", "BENCH_SERVING_REQUESTS": "20"},
    "serve": {"BENCH_SERVE_REQUESTS": "20"},
    "predict": {"BENCH_PREDICT_IMAGES": "24", "BENCH_PREDICT_SINGLE": "1"},
    "ui": {"BENCH_UI_IMAGES": "200", "BENCH_UI_ROUNDS": "1"},
}
# Parts with no tiny settings yet, each with the reason.
UNSIZED = {
    "transfer": "benchmarks/transfer_bench.py sizes only its datasets (BENCH_TRANSFER_DATASETS); "
    "its smallest run trains nine models for minutes each",
}
CHECKOUT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def test_every_part_has_tiny_settings_or_a_reason():
    assert sorted(PARTS) == sorted([*TINY, *UNSIZED])


# The parts `make test` runs (seconds to a minute each); the others run whole pipelines or
# several TensorFlow processes for minutes each, so `make bench-test` runs them.
IN_SUITE = {
    "training",
    "input_limit",
    "input_ablation",
    "input_overlap",
    "predict",
    "ingest",
    "serving",
}


def _marked(part: str):
    return pytest.param(part, marks=pytest.mark.slow if part in IN_SUITE else pytest.mark.bench)


@pytest.mark.parametrize("part", [_marked(part) for part in sorted(TINY)])
def test_the_part_runs_charts_and_renders_on_tiny_settings(part, tmp_path):
    output, page = tmp_path / "bench", tmp_path / "performance.md"
    finished = subprocess.run(
        [sys.executable, "-m", "benchmarks.run", "--parts", part, "--output", str(output)]
        + ["--docs", str(page)],
        cwd=CHECKOUT,
        env={**os.environ, **TINY[part], "PYTHONPATH": CHECKOUT},
        capture_output=True,
        text=True,
        timeout=1800,  # a loaded shared machine stretches the slowest part to minutes
    )
    assert finished.returncode == 0, finished.stderr[-3000:]
    records = json.loads((output / "results.json").read_text())
    assert records and {record["part"] for record in records} == {part}
    assert all(
        isinstance(record["value"], int | float) and math.isfinite(record["value"])
        for record in records
    )
    assert (tmp_path / "performance" / f"{part}.png").stat().st_size > 0
    own = page.read_text().split(f"(`{part}`)\n", 1)[1].split("\n## ", 1)[0]
    assert "not measured" not in own.lower()
    assert f"![{part}](performance/{part}.png)" in own
