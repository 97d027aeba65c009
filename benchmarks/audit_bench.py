"""Label audit: how many injected label flips `imgpipe audit` finds, by each method, on real images.

Data, real images nobody here drew, with FLIPPED_SHARE of them moved into another class's folder
(benchmarks/health_bench.py flip_labels):
  digits: scikit-learn's handwritten digits (load_digits: real 8x8 scans, bundled), the first
    DIGITS_PER_CLASS of each digit in a seeded order, upscaled to DIGIT_SIDE px JPEGs;
  photos: PHOTO_COUNT crops of scikit-image's sample photographs, one class per photograph
    (benchmarks/photo_data.write_photo_jpegs).
Each is audited by `imgpipe audit --data <it> --folds FOLDS --method <method>`, as a user would run
it (its own process; the training method with the local preset's trainer), for every method in
BENCH_AUDIT_METHODS (default: both), and its health.json is read back.

Measured, per dataset and method:
- recall: the share of the audited flipped images among the suspects (a flip the ingest
  rejected, as a copy carrying another label, is not audited and not counted);
- precision: the share of suspects that were flipped;
- the audit's wall time, its ingest included (the same ingest for both methods);
- the held-out accuracy of the fold models over every image.

Settings (environment), besides BENCH_AUDIT_METHODS:
  BENCH_AUDIT_FOLDS             FOLDS (default 5)
  BENCH_AUDIT_DIGITS_PER_CLASS  DIGITS_PER_CLASS (default 50)
  BENCH_AUDIT_PHOTOS            PHOTO_COUNT (default 350)
  BENCH_AUDIT_PRESET            the training method's preset, local or runlocal (default local)
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time

from benchmarks.charts import share_bars
from benchmarks.health_bench import flip_labels
from benchmarks.report import Section

TITLE = "Label audit: flipped labels found over every image"
FLIPPED_SHARE = 0.05
FOLDS = int(os.environ.get("BENCH_AUDIT_FOLDS", "5"))
SEED = 0
DIGITS_PER_CLASS = int(os.environ.get("BENCH_AUDIT_DIGITS_PER_CLASS", "50"))
DIGIT_SIDE = 64
PHOTO_COUNT = int(os.environ.get("BENCH_AUDIT_PHOTOS", "350"))
PRESET = os.environ.get("BENCH_AUDIT_PRESET", "local")
DATASETS = ("digits", "photos")
METHODS = tuple(os.environ.get("BENCH_AUDIT_METHODS", "embeddings training").split())


def _write_digits(folder: str) -> None:
    import numpy as np
    from PIL import Image
    from sklearn.datasets import load_digits

    digits = load_digits()
    scans = np.round(digits.images * (255.0 / 16.0)).astype(np.uint8)
    order = np.random.default_rng(SEED).permutation(len(scans))
    for digit in range(10):
        os.makedirs(os.path.join(folder, str(digit)))
        chosen = [i for i in order if digits.target[i] == digit][:DIGITS_PER_CLASS]
        for index in chosen:
            image = Image.fromarray(scans[index]).convert("RGB")
            image = image.resize((DIGIT_SIDE, DIGIT_SIDE), Image.Resampling.BICUBIC)
            image.save(os.path.join(folder, str(digit), f"{index:04d}.jpg"), quality=95)


def _dataset(name: str, folder: str) -> list[str]:
    """The dataset with flipped labels, written anew; returns the flipped images' new paths."""
    import numpy as np

    from benchmarks.photo_data import write_photo_jpegs

    shutil.rmtree(folder, ignore_errors=True)
    if name == "digits":
        _write_digits(folder)
    else:
        write_photo_jpegs(folder, PHOTO_COUNT, SEED)
        os.remove(os.path.join(folder, "photos.json"))  # its marker, not an image
    paths = sorted(
        f"{label}/{image}"
        for label in sorted(os.listdir(folder))
        for image in os.listdir(os.path.join(folder, label))
    )
    rng = np.random.default_rng(SEED)
    chosen = rng.choice(len(paths), round(FLIPPED_SHARE * len(paths)), replace=False)
    return flip_labels(folder, [paths[i] for i in sorted(chosen)], rng)


def _audit(folder: str, build_dir: str, method: str) -> tuple[dict, float, list[str]]:
    """`imgpipe audit` in its own process: its health.json, its wall seconds, the audited paths."""
    from components.evaluation.evaluation_report import read_scores
    from components.validation.data_health import read_health

    command = [sys.executable, "-m", "pipeline.cli", "audit", "--data", folder]
    command += ["--build-dir", build_dir, "--folds", str(FOLDS), "--method", method]
    command += ["--preset", PRESET]
    started = time.perf_counter()
    result = subprocess.run(command, capture_output=True, text=True, check=True)
    seconds = time.perf_counter() - started
    print(result.stdout, end="", flush=True)
    report = next(line for line in result.stdout.splitlines() if line.startswith("report: "))
    report_dir = os.path.dirname(report.removeprefix("report: "))
    return read_health(report_dir), seconds, read_scores(report_dir).source_paths


def _measure(dataset: str, method: str, workdir: str, flips: set[str]) -> list[dict]:
    folder = os.path.join(workdir, dataset)
    build_dir = os.path.join(workdir, f"build-{dataset}-{method}")
    shutil.rmtree(build_dir, ignore_errors=True)
    health, seconds, audited = _audit(folder, build_dir, method)
    audited_flips = flips & set(audited)
    suspects = {issue["path"] for issue in health["label_issues"]}
    caught = suspects & audited_flips
    prefix = f"audit.{dataset}.{method}."
    audit = health["audit"]
    return [
        {
            "name": prefix + "recall",
            "value": len(caught) / max(1, len(audited_flips)),
            "unit": "share",
            "flipped": len(audited_flips),
            "images": len(audited),
        },
        {
            "name": prefix + "precision",
            "value": len(caught) / max(1, len(suspects)),
            "unit": "share",
            "suspects": len(suspects),
        },
        {
            "name": prefix + "held_out_accuracy",
            "value": audit["held_out_accuracy_overall"],
            "unit": "accuracy",
            "at_chance": audit["at_chance"],
        },
        {"name": prefix + "wall_seconds", "value": seconds, "unit": "s"},
    ]


def run(output_dir: str) -> list[dict]:
    workdir = os.path.join(output_dir, "audit")
    records = []
    for dataset in DATASETS:
        flips = set(_dataset(dataset, os.path.join(workdir, dataset)))
        for method in METHODS:
            for record in _measure(dataset, method, workdir, flips):
                records.append(record)
                print(f"{record['name']:<46} {record['value']:.4g} {record['unit']}", flush=True)
    return records


def chart(records: list[dict], path: str) -> None:
    shares = [r for r in records if r["unit"] == "share"]
    share_bars(
        shares,
        "audit.",
        f"imgpipe audit, {FOLDS} folds, {FLIPPED_SHARE:.0%} flipped: recall and precision",
        path,
        width=10,
    )


def section(records: list[dict]) -> Section:
    by_name = {r["name"]: r for r in records}
    rows = []
    for dataset in DATASETS:
        for method in METHODS:
            prefix = f"audit.{dataset}.{method}."
            if prefix + "recall" not in by_name:
                continue
            recall = by_name[prefix + "recall"]
            rows.append(
                (
                    dataset,
                    method,
                    f"{recall['flipped']} of {recall['images']}",
                    f"{recall['value']:.3f}",
                    f"{by_name[prefix + 'precision']['value']:.3f}",
                    str(by_name[prefix + "precision"]["suspects"]),
                    f"{by_name[prefix + 'held_out_accuracy']['value']:.3f}",
                    f"{by_name[prefix + 'wall_seconds']['value']:.0f}",
                )
            )
    notes = (
        f"{FOLDS} folds; training: the local preset's trainer per fold; embeddings: "
        "EfficientNet-Lite0 ImageNet embeddings and a logistic regression per fold",
        "recall: flipped images among the suspects; precision: suspects that were flipped; "
        "wall seconds include the ingest",
    )
    return Section(
        "Label audit: flipped labels found over every image, by method",
        (
            "data",
            "method",
            "flipped",
            "recall",
            "precision",
            "suspects",
            "held-out accuracy",
            "wall s",
        ),
        tuple(rows),
        notes,
    )


def meaning(records: list[dict]) -> list[str]:
    by_name = {r["name"]: r for r in records}
    found = [
        f"{dataset} by {method}: recall {by_name[prefix + 'recall']['value']:.2f}, precision "
        f"{by_name[prefix + 'precision']['value']:.2f} in "
        f"{by_name[prefix + 'wall_seconds']['value']:.0f} s"
        for dataset in DATASETS
        for method in METHODS
        if (prefix := f"audit.{dataset}.{method}.") + "recall" in by_name
    ]
    return [
        "Flipped labels found (" + "; ".join(found) + ")." if found else "",
        *section(records).notes[:1],
    ]
