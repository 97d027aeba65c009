"""Label audit: how many injected label flips `imgpipe audit` finds over the whole dataset.

Data: the embedded default dataset (6 classes x 300 shape images), with FLIPPED_SHARE of its
images moved into another class's folder (benchmarks/health_bench.py flip_labels). Then
`imgpipe audit --data <it> --folds FOLDS` runs as a user would run it (its own process, the
local preset's trainer) and its health.json is read back.

Measured:
- the share of the flipped images among the suspects (recall) and the share of suspects that
  were flipped (precision);
- the share of the flipped images that fell in the eval split: all that the pipeline's own
  check (DataHealthGen, eval images only) could ever name;
- the audit's wall time, its ingest and its FOLDS trainings included.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time

from benchmarks.charts import share_bars
from benchmarks.health_bench import flip_labels
from benchmarks.report import Section

FLIPPED_SHARE = 0.05
FOLDS = 5
SEED = 0


def _dataset(folder: str) -> list[str]:
    """The embedded dataset with flipped labels; returns the flipped images' new paths."""
    import numpy as np

    from data_prep.default_dataset import generate_default_dataset

    shutil.rmtree(folder, ignore_errors=True)
    generate_default_dataset(folder)
    paths = sorted(
        f"{label}/{name}"
        for label in sorted(os.listdir(folder))
        if os.path.isdir(os.path.join(folder, label))
        for name in os.listdir(os.path.join(folder, label))
    )
    rng = np.random.default_rng(SEED)
    chosen = rng.choice(len(paths), round(FLIPPED_SHARE * len(paths)), replace=False)
    return flip_labels(folder, [paths[i] for i in sorted(chosen)], rng)


def _audit(folder: str, build_dir: str) -> tuple[dict, float, str]:
    """`imgpipe audit` in its own process: its health.json, its wall seconds, its report folder."""
    from components.validation.data_health import read_health

    command = [sys.executable, "-m", "pipeline.cli", "audit", "--data", folder]
    command += ["--build-dir", build_dir, "--folds", str(FOLDS)]
    started = time.perf_counter()
    result = subprocess.run(command, capture_output=True, text=True, check=True)
    seconds = time.perf_counter() - started
    print(result.stdout, end="", flush=True)
    report = next(line for line in result.stdout.splitlines() if line.startswith("report: "))
    report_dir = os.path.dirname(report.removeprefix("report: "))
    return read_health(report_dir), seconds, report_dir


def run(output_dir: str) -> list[dict]:
    from data_prep.writing.ingest_outputs import IngestOutputs, read_source_index

    workdir = os.path.join(output_dir, "audit")
    folder = os.path.join(workdir, "shapes")
    flips = set(_dataset(folder))
    health, seconds, report_dir = _audit(folder, os.path.join(workdir, "build"))
    index = read_source_index(
        IngestOutputs.under(os.path.join(report_dir, "ingest")).source_index_path
    )
    in_eval = {row["path"] for row in index if row["split"] == "eval"} & flips
    suspects = {issue["path"] for issue in health["label_issues"]}
    caught = suspects & flips
    records = [
        {
            "name": "audit.flips_caught",
            "value": len(caught) / len(flips),
            "unit": "share",
            "flipped": len(flips),
            "images": health["eval_images_checked"],
            "folds": FOLDS,
            "held_out_accuracy": health["audit"]["held_out_accuracy"],
        },
        {
            "name": "audit.suspects_flipped",
            "value": len(caught) / max(1, len(suspects)),
            "unit": "share",
            "suspects": len(suspects),
        },
        {
            "name": "audit.flips_in_eval_split",
            "value": len(in_eval) / len(flips),
            "unit": "share",
        },
        {"name": "audit.wall_seconds", "value": seconds, "unit": "s"},
    ]
    with open(os.path.join(workdir, "flips.json"), "w") as handle:
        json.dump(sorted(flips), handle)
    for record in records:
        print(f"{record['name']:<46} {record['value']:.4g} {record['unit']}", flush=True)
    return records


def chart(records: list[dict], path: str) -> None:
    shares = [r for r in records if r["unit"] == "share"]
    share_bars(
        shares,
        "audit.",
        f"imgpipe audit, {FOLDS} folds: embedded dataset, {FLIPPED_SHARE:.0%} flipped",
        path,
    )


def section(records: list[dict]) -> Section:
    by_name = {r["name"].removeprefix("audit."): r for r in records}
    rows = tuple((name, f"{r['value']:.4g}", r["unit"]) for name, r in by_name.items())
    caught = by_name["flips_caught"]
    accuracy = caught["held_out_accuracy"]
    notes = (
        f"{caught['flipped']} of {caught['images']} images flipped; {FOLDS} folds of the local "
        f"preset's trainer, held-out accuracy {min(accuracy):.3f} to {max(accuracy):.3f}",
        f"{by_name['suspects_flipped']['suspects']} suspects; flips_in_eval_split is the most "
        "the pipeline's eval-only check could name",
    )
    return Section(
        "Label audit: flipped labels found over every image by k-fold training",
        ("measured", "value", "unit"),
        rows,
        notes,
    )
