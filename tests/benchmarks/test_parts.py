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

# Each part's BENCH_* settings that make it take seconds to a minute.
TINY = {
    "training": {
        "BENCH_TRAINING_STEPS": "8",
        "BENCH_TRAINING_WARMUP": "8",
        "BENCH_TRAINING_REPEATS": "1",
    },
    "input_limit": {"BENCH_INPUT_IMAGES": "96", "BENCH_RUNS": "1"},
    "input_ablation": {"BENCH_INPUT_IMAGES": "192", "BENCH_RUNS": "1"},
    "input_overlap": {"BENCH_INPUT_IMAGES": "192", "BENCH_RUNS": "1"},
    "predict": {"BENCH_PREDICT_IMAGES": "24", "BENCH_PREDICT_SINGLE": "1"},
    "ingest": {"BENCH_INGEST_IMAGES": "150 300", "BENCH_INGEST_RUNS": "1"},
    "serving": {"BENCH_SERVING_RUNS": "1", "BENCH_SERVING_REQUESTS": "20"},
}
CHECKOUT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


@pytest.mark.slow
@pytest.mark.parametrize("part", sorted(TINY))
def test_the_part_runs_charts_and_renders_on_tiny_settings(part, tmp_path):
    output, page = tmp_path / "bench", tmp_path / "performance.md"
    finished = subprocess.run(
        [sys.executable, "-m", "benchmarks.run", "--parts", part, "--output", str(output)]
        + ["--docs", str(page)],
        cwd=CHECKOUT,
        env={**os.environ, **TINY[part], "PYTHONPATH": CHECKOUT},
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert finished.returncode == 0, finished.stderr[-3000:]
    records = json.loads((output / "results.json").read_text())
    assert records and {record["part"] for record in records} == {part}
    assert all(math.isfinite(record["value"]) for record in records)
    assert (output / f"{part}.png").stat().st_size > 0
    assert page.read_text().strip()
