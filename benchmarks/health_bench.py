"""Data health: near-duplicates found, splits that do not leak, flipped labels caught, and cost.

Data: scikit-learn's handwritten digits (load_digits: 1,797 real 8x8 scans, bundled), upscaled
to 64x64 RGB JPEGs in a folder per digit. Into it go known near-duplicates of COPIED_SHARE of
the scans, each one copy of one kind in turn: re-encoded (JPEG quality 60), resized (to 96x96),
cropped (2 pixels off each side) and brightness-shifted (x1.25); and known label flips of
FLIPPED_SHARE of the other scans (moved to another digit's folder). The ingest (`imgpipe prep`'s
job, default settings) then runs on it.

Measured:
- pairs: of the injected (scan, copy) pairs, the share whose two images share a cluster
  (recall); of every pair of images in a same cluster, the share that is not injected (false
  pairs), and that share less the pairs whose original scans are near-identical in the data
  itself (ALIKE_SCANS: real near-duplicates nobody injected);
- straddling: injected pairs whose two images landed in different splits, among the pairs found
  and among all, with the ingest's cluster-aware split and with a split by each file's own hash
  (what it did before clusters);
- eval accuracy of a 1-nearest-neighbour classifier on 16x16 pixels, trained on train, scored on
  eval, with each split: a model that memorizes, so a leaky eval split shows as a higher figure;
- label errors: the eval split's out-of-sample probabilities of a logistic regression trained on
  the (noisy) train split go through data_prep/quality/label_issues.py (cleanlab), as the pipeline's
  eval probabilities do; the share of flipped eval images among the suspects' paths (recall) and
  the share of suspects that were flipped (precision);
- the near-duplicate threshold's effect (ingest.near_duplicate_max_difference at each of
  SWEPT_DIFFERENCES, data_prep/quality/health.py called directly): on the digits at 64 px and
  on 128x128 crops of scikit-image's photographs (a stride of 64, PHOTOS_SWEPT), each with a
  copy of SWEPT_COPIED_SHARE of the images made as people make copies (rescaled by 0.7 or 1.3,
  0 to 3 pixels cropped off each side, brightness x0.9 to x1.1, re-saved as JPEG at quality 60
  to 90): the share of copies in their original's cluster (recall), and the share of all
  images that are distinct originals sharing a cluster (merged);
- brightness drift: on the same images (no copies), the data gate's brightness distance
  (components/validation/class_drift.py, the share of images moved) between half of them
  as the baseline and the other half as the span: as it is (sampling noise), with
  DARKENED_FEW images darkened by half, and with a third darkened by each of DARKENED_FACTORS;
- a span that adds a class: the gate's size and brightness distances on the classes both
  spans share, beside the distance over the whole split, between half of the digits but
  NEW_DIGIT (the baseline) and the other half adding NEW_DIGIT or half the photo crops as a
  class; and adding NEW_DIGIT with a third of the shared classes' images darkened by
  SHARED_DARKENED;
- cost: the ingest's CPU time per further image (its whole process tree, in a child process:
  its run on PHOTOS photo-like JPEGs (benchmarks/photo_data.py) less its run on FEW), the
  median of COST_ROUNDS rounds (a whole process's CPU time varies by a second or more from run
  to run here, so one round decides nothing), with the lowest and highest round beside it.
  Beside it the decode floor (read and decode each file, one process) and the health signals
  alone (data_prep/quality/health.py image_signals on each image just decoded, as the ingest
  runs them), the two timed file by file in the same pass, best of 3 passes; the signals'
  share of the ingest's cost is theirs over the ingest's.

Settings (environment):
  BENCH_HEALTH_SCANS        the first this many digit scans (default all 1,797)
  BENCH_HEALTH_PHOTOS       PHOTOS, the photo-like JPEGs of the cost (default 1500)
  BENCH_HEALTH_COST_ROUNDS  COST_ROUNDS (default 9)
"""

from __future__ import annotations

import collections
import glob
import hashlib
import io
import itertools
import json
import os
import posixpath
import shutil
import statistics
import time

from benchmarks.charts import share_bars
from benchmarks.report import Section

TITLE = "Data health: near-duplicates, leak-free splits, label errors"
SIDE = 64
COPIED_SHARE = 0.15
FLIPPED_SHARE = 0.05
COPY_KINDS = ("reencoded", "resized", "cropped", "brightened")
# Enough photos that the noise of a process's start-up (some 2.5 CPU seconds, shared by both
# counts) stays small beside the images' own cost.
PHOTOS = int(os.environ.get("BENCH_HEALTH_PHOTOS", "1500"))
FEW = 14
COST_ROUNDS = int(os.environ.get("BENCH_HEALTH_COST_ROUNDS", "9"))
SCANS = os.environ.get("BENCH_HEALTH_SCANS")
SEED = 0
SWEPT_DIFFERENCES = (0.3, 0.5, 0.8)
SWEPT_COPIED_SHARE = 0.1
DARKENED_FEW = 5
DARKENED_FACTORS = (0.9, 0.8, 0.7, 0.5)
NEW_DIGIT = "9"  # the class a span adds to the digits
SHARED_DARKENED = 0.8
# scikit-image's bundled photographs (the others need a download); cat is chelsea again.
PHOTOS_SWEPT = (
    "astronaut",
    "camera",
    "chelsea",
    "coffee",
    "coins",
    "grass",
    "gravel",
    "horse",
    "hubble_deep_field",
    "immunohistochemistry",
    "moon",
    "page",
    "rocket",
    "text",
    "brick",
    "colorwheel",
    "retina",
)
# Two scans whose pixels differ by at most this on average (of 16) are near-identical in the
# data itself: closer than 99.9% of random pairs of scans.
ALIKE_SCANS = 1.0


def _scans(values):
    """The digits' scans (or their labels) this run uses: all, or the first BENCH_HEALTH_SCANS."""
    return values[: int(SCANS)] if SCANS else values


def _copy(image, kind: str):
    from PIL import Image, ImageEnhance

    if kind == "resized":
        return image.resize((SIDE * 3 // 2, SIDE * 3 // 2), Image.Resampling.BICUBIC)
    if kind == "cropped":
        return image.crop((2, 2, SIDE - 2, SIDE - 2))
    if kind == "brightened":
        return ImageEnhance.Brightness(image).enhance(1.25)
    return image  # re-encoded: saved at a lower quality below


def write_dataset(folder: str) -> dict:
    """The digits with injected copies and flips; returns what was injected, by relative path."""
    import numpy as np
    from PIL import Image
    from sklearn.datasets import load_digits

    shutil.rmtree(folder, ignore_errors=True)
    digits = load_digits()
    scans = np.round(_scans(digits.images) * (255.0 / 16.0)).astype(np.uint8)
    rng = np.random.default_rng(SEED)
    order = rng.permutation(len(scans))
    copied = set(order[: round(COPIED_SHARE * len(scans))].tolist())
    flipped = set(order[len(copied) : len(copied) + round(FLIPPED_SHARE * len(scans))].tolist())
    pairs, to_flip, kinds = [], [], itertools.cycle(COPY_KINDS)
    for index, (scan, digit) in enumerate(zip(scans, _scans(digits.target), strict=True)):
        label = int(digit)
        image = Image.fromarray(scan).convert("RGB").resize((SIDE, SIDE), Image.Resampling.BICUBIC)
        path = f"{label}/{index:04d}.jpg"
        _save(image, os.path.join(folder, path), 95)
        if index in flipped:
            to_flip.append(path)
        if index in copied:
            kind = next(kinds)
            copy_path = f"{label}/{index:04d}_{kind}.jpg"
            _save(
                _copy(image, kind),
                os.path.join(folder, copy_path),
                60 if kind == "reencoded" else 95,
            )
            pairs.append((path, copy_path, kind))
    return {"pairs": pairs, "flips": flip_labels(folder, to_flip, rng)}


def flip_labels(folder: str, paths: list[str], rng) -> list[str]:
    """Moves each image (a path relative to a folder of class folders) into another class's
    folder, drawn uniformly with `rng` (a numpy Generator); returns the new relative paths."""
    classes = sorted(entry.name for entry in os.scandir(folder) if entry.is_dir())
    moved = []
    for path in paths:
        label, name = path.split("/")
        shift = int(rng.integers(1, len(classes)))
        new_path = f"{classes[(classes.index(label) + shift) % len(classes)]}/{name}"
        os.rename(os.path.join(folder, path), os.path.join(folder, new_path))
        moved.append(new_path)
    return moved


def _save(image, path: str, quality: int) -> None:
    os.makedirs(os.path.dirname(path), exist_ok=True)
    image.save(path, format="JPEG", quality=quality)


def _ingest(folder: str, output: str) -> tuple[dict, dict[str, dict]]:
    from data_prep.ingest import run_ingest
    from data_prep.ingest_config import IngestConfig
    from data_prep.writing.ingest_outputs import IngestOutputs, read_source_index

    outputs = IngestOutputs.under(output)
    report = run_ingest(IngestConfig(input=folder), outputs)
    rows = {row["path"]: row for row in read_source_index(outputs.source_index_path)}
    return report, rows


def _pixels(folder: str, paths: list[str]):
    import numpy as np
    from PIL import Image

    return (
        np.stack(
            [
                np.asarray(Image.open(os.path.join(folder, p)).convert("L").resize((16, 16)))
                for p in paths
            ]
        ).reshape(len(paths), -1)
        / 255.0
    )


def _eval_accuracy(folder: str, split_of: dict[str, str], labels: dict[str, int]) -> float:
    from sklearn.neighbors import KNeighborsClassifier

    train = sorted(p for p, s in split_of.items() if s == "train")
    held = sorted(p for p, s in split_of.items() if s == "eval")
    model = KNeighborsClassifier(n_neighbors=1).fit(
        _pixels(folder, train), [labels[p] for p in train]
    )
    return float(model.score(_pixels(folder, held), [labels[p] for p in held]))


def _label_issues(folder: str, rows: dict[str, dict]) -> dict:
    import numpy as np
    from sklearn.linear_model import LogisticRegression

    from data_prep.quality.label_issues import find_label_issues

    train = sorted(p for p, row in rows.items() if row["split"] == "train")
    held = sorted(p for p, row in rows.items() if row["split"] == "eval")
    model = LogisticRegression(max_iter=2000).fit(
        _pixels(folder, train), [int(rows[p]["label"]) for p in train]
    )
    probabilities = model.predict_proba(_pixels(folder, held))
    labels = np.array([int(rows[p]["label"]) for p in held])
    names = [str(c) for c in model.classes_]
    return {"issues": find_label_issues(labels, probabilities, held, names), "eval": held}


def _source_difference(pair: frozenset) -> float:
    """Mean absolute difference of the two images' original scans, on the scans' 0..16 scale."""
    import numpy as np
    from sklearn.datasets import load_digits

    first, second = (int(posixpath.basename(p)[:4]) for p in pair)
    scans = load_digits().images
    return float(np.abs(scans[first] - scans[second]).mean())


def _cluster_pairs(clusters: list[list[str]]) -> set[frozenset]:
    return {frozenset(pair) for members in clusters for pair in itertools.combinations(members, 2)}


def _file_hash_split(folder: str, paths: list[str]) -> dict[str, str]:
    """The split each file had before clusters: by its own content hash."""
    from data_prep.ingest_config import IngestConfig
    from data_prep.writing.plan import split_of

    config = IngestConfig(input=folder)
    split = {}
    for path in paths:
        with open(os.path.join(folder, path), "rb") as handle:
            sha = hashlib.sha256(handle.read()).hexdigest()
        split[path] = split_of(sha, config.eval_fraction, config.test_fraction)
    return split


def _cost(workdir: str) -> dict:
    """CPU milliseconds per image: the ingest's with the health signals and without them (each
    further image's: its process on PHOTOS images less its process on FEW, start-up and imports
    paid by both), the decode floor's and the signals'."""
    from PIL import Image

    from benchmarks.ingest_bench import _measure
    from benchmarks.photo_data import write_photo_jpegs
    from data_prep.quality.health import image_signals

    folders = {
        count: write_photo_jpegs(f"{workdir}/photos_{count}", count) for count in (PHOTOS, FEW)
    }
    rounds = []
    for _ in range(COST_ROUNDS):  # in turns, so a change in the machine's load falls on all
        cpu = {
            count: _measure("beam", folder, f"{workdir}/photos_{count}_beam", memory=False)["cpu_s"]
            for count, folder in folders.items()
        }
        rounds.append((cpu[PHOTOS] - cpu[FEW]) / (PHOTOS - FEW) * 1000.0)
    files = sorted(glob.glob(os.path.join(folders[PHOTOS], "*", "*.jpg")))

    def decode_then_signals() -> tuple[float, float]:
        """CPU seconds decoding, and computing the signals on the pixels just decoded (as the
        ingest does), timed file by file: the two share every moment's load."""
        decode_s = signals_s = 0.0
        for path in files:
            started = time.process_time()
            with open(path, "rb") as handle:
                image = Image.open(io.BytesIO(handle.read()))
                image.load()
            decoded = time.process_time()
            image_signals(image)
            decode_s, signals_s = (
                decode_s + decoded - started,
                signals_s + time.process_time() - decoded,
            )
        return decode_s, signals_s

    runs = [decode_then_signals() for _ in range(3)]  # best of 3: both within one process
    decode_s, signals_s = (min(run[k] for run in runs) for k in (0, 1))
    per_image = 1000.0 / len(files)
    return {
        "ingest": statistics.median(rounds),
        "ingest_rounds": sorted(rounds),
        "decode": decode_s * per_image,
        "signals": signals_s * per_image,
    }


def _people_copy(image, rng):
    """Rescaled by about 30%, a few pixels cropped off each side, brightness within 10%,
    re-saved as a JPEG."""
    from PIL import Image, ImageEnhance

    scale = rng.choice([0.7, 1.3]) * rng.uniform(0.95, 1.05)
    image = image.resize(
        (round(image.width * scale), round(image.height * scale)), Image.Resampling.BICUBIC
    )
    left, top, right, bottom = (int(c) for c in rng.integers(0, 4, 4))
    image = image.crop((left, top, image.width - right, image.height - bottom))
    image = ImageEnhance.Brightness(image).enhance(rng.uniform(0.9, 1.1))
    return _jpeg(image, int(rng.integers(60, 91)))


def _jpeg(image, quality: int):
    from PIL import Image

    buffer = io.BytesIO()
    image.save(buffer, format="JPEG", quality=quality)
    return Image.open(io.BytesIO(buffer.getvalue())).convert("RGB")


def _swept_images() -> dict[str, list]:
    """The real images the threshold sweep runs on: digits at 64 px, photo crops."""
    import numpy as np
    import skimage.data
    from PIL import Image
    from sklearn.datasets import load_digits

    scans = np.round(_scans(load_digits().images) * (255.0 / 16.0)).astype(np.uint8)
    digits = [
        _jpeg(Image.fromarray(s).convert("RGB").resize((SIDE, SIDE), Image.Resampling.BICUBIC), 95)
        for s in scans
    ]
    crops = []
    for name in PHOTOS_SWEPT:
        pixels = getattr(skimage.data, name)().astype(np.float64)
        pixels = 255 * (pixels - pixels.min()) / max(np.ptp(pixels), 1e-9)
        photo = Image.fromarray(pixels.astype(np.uint8)).convert("RGB")
        photo.thumbnail((512, 512))
        for top in range(0, photo.height - 127, 64):
            for left in range(0, photo.width - 127, 64):
                crops.append(_jpeg(photo.crop((left, top, left + 128, top + 128)), 95))
    return {"digits": digits, "photos": crops}


def _threshold_sweep(swept: dict[str, list]) -> list[dict]:
    """Copy recall and distinct images merged at each of SWEPT_DIFFERENCES."""
    import numpy as np

    from data_prep.quality import health

    records = []
    for name, originals in swept.items():
        rng = np.random.default_rng(SEED)
        copied = rng.permutation(len(originals))[: round(SWEPT_COPIED_SHARE * len(originals))]
        images = originals + [_people_copy(originals[i], rng) for i in copied]
        pairs = [(int(i), len(originals) + k) for k, i in enumerate(copied)]
        signals = [health.image_signals(image) for image in images]
        for max_difference in SWEPT_DIFFERENCES:
            found = health.near_duplicate_pairs(
                [s.phash for s in signals], [s.gray for s in signals], 10, max_difference
            )
            cluster_of = {
                i: k
                for k, members in enumerate(health.clusters(len(images), found))
                for i in members
            }
            recall = sum(a in cluster_of and cluster_of[a] == cluster_of.get(b) for a, b in pairs)
            by_cluster = collections.Counter(
                cluster_of[i] for i in cluster_of if i < len(originals)
            )
            merged = sum(count for count in by_cluster.values() if count > 1)
            base = f"health.threshold.{max_difference:g}.{name}"
            records += [
                {"name": f"{base}.copy_recall", "value": recall / len(pairs), "unit": "share"},
                {"name": f"{base}.merged", "value": merged / len(images), "unit": "share"},
            ]
    return records


def _brightness_drift(swept: dict[str, list]) -> list[dict]:
    """The gate's brightness distance between half of each dataset (the baseline) and the other
    half (the span) as it is, with DARKENED_FEW images and with a third of its images darkened
    by each of DARKENED_FACTORS."""
    import collections

    import numpy as np

    from components.validation.class_drift import counts_distance
    from data_prep.quality import health

    def counts(images) -> dict[int, int]:
        return collections.Counter(
            health.brightness_level(health.image_signals(image)) for image in images
        )

    records = []
    for name, images in swept.items():
        order = np.random.default_rng(SEED).permutation(len(images))
        baseline = counts([images[i] for i in order[: len(images) // 2]])
        span = [images[i] for i in order[len(images) // 2 :]]
        third = len(span) // 3
        spans = {
            "as_is": span,
            f"{DARKENED_FEW}_darker_x0.5": _darker(span[:DARKENED_FEW], 0.5) + span[DARKENED_FEW:],
            **{
                f"third_darker_x{factor:g}": _darker(span[:third], factor) + span[third:]
                for factor in DARKENED_FACTORS
            },
        }
        records += [
            {
                "name": f"health.brightness.{name}.{case}",
                "value": counts_distance(counts(changed), baseline),
                "unit": "distance",
                "baseline_images": len(images) - len(span),
                "span_images": len(span),
            }
            for case, changed in spans.items()
        ]
    return records


def _darker(images, factor: float) -> list:
    from PIL import ImageEnhance

    return [ImageEnhance.Brightness(image).enhance(factor) for image in images]


def _class_report(images: list[tuple[str, object]]) -> dict:
    """The label map and the counts per class an ingest report holds, of a train split of
    these (class, image) pairs, counted as the ingest counts them."""
    from data_prep.quality import health
    from data_prep.reading.inspection import ACCEPTED, FileOutcome
    from data_prep.reading.sources import SourceFile
    from data_prep.writing.ingest_outputs import CLASS_HISTOGRAMS
    from data_prep.writing.plan import class_histograms

    outcomes = [
        FileOutcome(
            SourceFile(f"{label}/{i}.jpg", "", label),
            ACCEPTED,
            height=image.height,
            width=image.width,
            signals=health.image_signals(image),
        )
        for i, (label, image) in enumerate(images)
    ]
    label_map = {label: i for i, label in enumerate(sorted({label for label, _ in images}))}
    return {"label_map": label_map, CLASS_HISTOGRAMS: class_histograms({"train": outcomes})}


def _class_drift(swept: dict[str, list]) -> list[dict]:
    """The gate's size and brightness distances on the classes both spans share, beside the
    distance over the whole split (the gate's measure before), between half of the digits but
    NEW_DIGIT (the baseline) and a span of the other half that adds a class: NEW_DIGIT, or half
    of the photo crops; and adding NEW_DIGIT with a third of the shared classes' images darkened
    by SHARED_DARKENED."""
    import numpy as np
    from sklearn.datasets import load_digits

    from components.validation.class_drift import (
        counts_distance,
        pooled_counts,
        shared_class_distances,
    )
    from data_prep.contract.features import HEIGHT
    from data_prep.writing.ingest_outputs import BRIGHTNESS
    from pipeline.config.pipeline_config import GateConfig

    labelled = list(zip(map(str, _scans(load_digits().target)), swept["digits"], strict=True))
    order = np.random.default_rng(SEED).permutation(len(labelled))
    halves = [[labelled[i] for i in part] for part in np.array_split(order, 2)]
    baseline = [pair for pair in halves[0] if pair[0] != NEW_DIGIT]
    shared = [pair for pair in halves[1] if pair[0] != NEW_DIGIT]
    new = [pair for pair in halves[1] if pair[0] == NEW_DIGIT]
    photos = [("photo", image) for image in swept["photos"][len(swept["photos"]) // 2 :]]
    third = len(shared) // 3
    darkened = _darker([image for _, image in shared[:third]], SHARED_DARKENED)
    darker = [(label, image) for (label, _), image in zip(shared, darkened, strict=False)]
    spans = {
        f"adds_digit_{NEW_DIGIT}": shared + new,
        "adds_photos": shared + photos,
        f"adds_digit_{NEW_DIGIT}_third_darker_x{SHARED_DARKENED:g}": darker + shared[third:] + new,
    }
    gate = GateConfig()
    thresholds = {HEIGHT: gate.image_size_share, BRIGHTNESS: gate.brightness_share}
    before = _class_report(baseline)
    records = []
    for case, span in spans.items():
        report = _class_report(span)
        distances, scope = shared_class_distances(report, before, "train", thresholds)
        records += [
            {
                "name": f"health.class_drift.{case}.{d.feature}",
                "value": d.distance,
                "unit": "distance",
                "passed": d.passed,
                "whole_split": counts_distance(
                    *(
                        pooled_counts(r, "train", r["label_map"], d.feature)
                        for r in (report, before)
                    )
                ),
                "compared": scope.describe(),
                "baseline_images": len(baseline),
                "span_images": len(span),
            }
            for d in distances
        ]
    return records


def run(output_dir: str) -> list[dict]:
    workdir = os.path.join(output_dir, "health")
    folder = os.path.join(workdir, "digits")
    injected = write_dataset(folder)
    report, rows = _ingest(folder, os.path.join(workdir, "ingest"))
    injected_pairs = {frozenset(pair[:2]) for pair in injected["pairs"]}
    found_pairs = _cluster_pairs(report["near_duplicates"])
    recall = len(injected_pairs & found_pairs) / len(injected_pairs)
    uninjected = found_pairs - injected_pairs
    false_pairs = len(uninjected) / max(1, len(found_pairs))
    alike_in_source = {pair for pair in uninjected if _source_difference(pair) <= ALIKE_SCANS}
    by_kind = {
        kind: sum(frozenset((a, b)) in found_pairs for a, b, k in injected["pairs"] if k == kind)
        / sum(k == kind for *_, k in injected["pairs"])
        for kind in COPY_KINDS
    }
    kept = sorted(rows)
    labels = {p: int(rows[p]["label"]) for p in kept}
    aware = {p: rows[p]["split"] for p in kept}
    leaky = _file_hash_split(folder, kept)

    def straddling(split: dict[str, str], pairs) -> int:
        return sum(
            1 for a, b in map(tuple, pairs) if a in split and b in split and split[a] != split[b]
        )

    suspects = _label_issues(folder, rows)
    flipped_eval = set(injected["flips"]) & set(suspects["eval"])
    caught = flipped_eval & {issue["path"] for issue in suspects["issues"]}
    cost = _cost(workdir)
    swept = _swept_images()
    sweeps = _threshold_sweep(swept) + _brightness_drift(swept) + _class_drift(swept)
    records = sweeps + [
        {
            "name": "health.pairs.recall",
            "value": recall,
            "unit": "share",
            "injected_pairs": len(injected_pairs),
            "by_kind": by_kind,
        },
        {
            "name": "health.pairs.false_share",
            "value": false_pairs,
            "unit": "share",
            "found_pairs": len(found_pairs),
            "clusters": len(report["near_duplicates"]),
        },
        {
            "name": "health.pairs.false_share_unlike_in_source",
            "value": (len(uninjected) - len(alike_in_source)) / max(1, len(found_pairs)),
            "unit": "share",
            "alike_in_source": len(alike_in_source),
        },
        {
            "name": "health.straddling.found_pairs.cluster_split",
            "value": straddling(aware, injected_pairs & found_pairs),
            "unit": "pairs",
        },
        {
            "name": "health.straddling.injected_pairs.cluster_split",
            "value": straddling(aware, injected_pairs),
            "unit": "pairs",
        },
        {
            "name": "health.straddling.injected_pairs.file_hash_split",
            "value": straddling(leaky, injected_pairs),
            "unit": "pairs",
        },
        {
            "name": "health.eval_accuracy.cluster_split",
            "value": _eval_accuracy(folder, aware, labels),
            "unit": "accuracy",
            "model": "1-nearest neighbour, 16x16 pixels",
        },
        {
            "name": "health.eval_accuracy.file_hash_split",
            "value": _eval_accuracy(folder, leaky, labels),
            "unit": "accuracy",
            "model": "1-nearest neighbour, 16x16 pixels",
        },
        {
            "name": "health.label_issues.flipped_eval_caught",
            "value": len(caught) / max(1, len(flipped_eval)),
            "unit": "share",
            "flipped_eval": len(flipped_eval),
            "suspects": len(suspects["issues"]),
        },
        {
            "name": "health.label_issues.suspects_flipped",
            "value": len(caught) / max(1, len(suspects["issues"])),
            "unit": "share",
        },
        {
            "name": "health.cost.ingest_cpu_ms_per_image",
            "value": cost["ingest"],
            "unit": "ms",
            "ratio": cost["ingest"] / cost["decode"],
            "baseline": "health.cost.decode_cpu_ms_per_image",
            "lowest": cost["ingest_rounds"][0],
            "highest": cost["ingest_rounds"][-1],
            "rounds": len(cost["ingest_rounds"]),
        },
        {"name": "health.cost.decode_cpu_ms_per_image", "value": cost["decode"], "unit": "ms"},
        {
            "name": "health.cost.signals_cpu_ms_per_image",
            "value": cost["signals"],
            "unit": "ms",
            "ratio": cost["signals"] / cost["decode"],
            "baseline": "health.cost.decode_cpu_ms_per_image",
        },
        {
            "name": "health.cost.signals_share_of_ingest",
            "value": cost["signals"] / cost["ingest"],
            "unit": "ratio",
            "ratio": cost["signals"] / cost["ingest"],
            "baseline": "health.cost.ingest_cpu_ms_per_image",
        },
    ]
    with open(os.path.join(workdir, "injected.json"), "w") as handle:
        json.dump(injected, handle)
    for record in records:
        print(f"{record['name']:<46} {record['value']:.4g} {record['unit']}", flush=True)
    return records


def chart(records: list[dict], path: str) -> None:
    shares = [r for r in records if r["unit"] in ("share", "accuracy")]
    share_bars(
        shares, "health.", "digits with injected near-duplicates and flipped labels", path, width=10
    )


def _cost_note(ingest: dict, share: dict) -> str:
    return (
        f"ingest CPU per image: median of {ingest['rounds']} rounds {ingest['value']:.3g} ms, "
        f"the rounds from {ingest['lowest']:.3g} to {ingest['highest']:.3g} ms; the health "
        f"signals take {share['value']:.0%} of it"
    )


def section(records: list[dict]) -> Section:
    by_name = {r["name"].removeprefix("health."): r for r in records}
    rows = tuple((name, f"{r['value']:.4g}", r["unit"]) for name, r in by_name.items())
    recall = by_name["pairs.recall"]
    notes = (
        f"{recall['injected_pairs']} injected pairs; found per kind: "
        + ", ".join(f"{k} {v:.2f}" for k, v in recall["by_kind"].items()),
        f"{by_name['pairs.false_share_unlike_in_source']['alike_in_source']} of the pairs "
        "nobody injected join scans that are near-identical in the digits themselves",
        f"label suspects: {by_name['label_issues.flipped_eval_caught']['suspects']} in an eval "
        f"split holding {by_name['label_issues.flipped_eval_caught']['flipped_eval']} flipped "
        "images; eval probabilities from a logistic regression on 16x16 pixels",
        "eval accuracy: a 1-nearest-neighbour classifier on 16x16 pixels, which memorizes: "
        "a near-duplicate of an eval image in train raises it",
        "threshold.<max_difference>.<data>: copies found (copy_recall) and distinct images "
        "merged (share of all images) at each ingest.near_duplicate_max_difference, on digits "
        "at 64 px and photo crops with copies rescaled, cropped, brightened and re-encoded",
        "brightness.<data>.<span>: the data gate's brightness distance (share of images moved; "
        "gate.brightness_share stops above 0.2) between half of the same images and the other "
        "half, as is, with a few darkened, and with a third darkened",
        "class_drift.<span>.<feature>: the gate's distance on the classes the span shares with "
        "half of the digits but 9 (its whole-split distance in the record), for a span adding "
        "the 9s or photo crops as a class, and adding the 9s with a third of the rest darker",
    )
    if "cost.signals_share_of_ingest" in by_name:  # results measured before it lack the share
        notes += (
            _cost_note(
                by_name["cost.ingest_cpu_ms_per_image"], by_name["cost.signals_share_of_ingest"]
            ),
        )
    return Section(
        "Data health: near-duplicates, leak-free splits, label errors, cost",
        ("measured", "value", "unit"),
        rows,
        notes,
    )


def headline(records: list[dict]) -> list[tuple[str, str]]:
    by_name = {r["name"].removeprefix("health."): r for r in records}
    share = by_name.get("cost.signals_share_of_ingest")
    if share is not None:
        ingest = by_name["cost.ingest_cpu_ms_per_image"]
        answer = (
            f"{share['value']:.0%} of the ingest's CPU per image "
            f"({by_name['cost.signals_cpu_ms_per_image']['value']:.2g} of "
            f"{ingest['value']:.2g} ms)"
        )
    else:  # results measured before the share: the ingest with the signals against without
        without = by_name["cost.ingest_vs_without_health"]["value"]
        answer = f"the ingest takes {without:.2f}x the CPU per image it takes without them"
    return [("Data health signals (near-duplicates, odd images) at ingest", answer)]


def meaning(records: list[dict]) -> list[str]:
    by_name = {r["name"].removeprefix("health."): r for r in records}
    recall, false = by_name["pairs.recall"], by_name["pairs.false_share"]
    aware = by_name["straddling.injected_pairs.cluster_split"]
    leaky = by_name["straddling.injected_pairs.file_hash_split"]
    caught = by_name["label_issues.flipped_eval_caught"]
    return [
        f"The ingest finds {recall['value']:.0%} of the injected near-duplicate pairs "
        f"({false['value']:.1%} of the pairs it joins were not injected); its split leaves "
        f"{aware['value']:.0f} injected pairs across train and eval, a split by file hash "
        f"{leaky['value']:.0f}.",
        f"Likely label errors: {caught['value']:.0%} of the flipped eval images are named.",
    ]
