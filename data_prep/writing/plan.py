"""Turns every file's outcome into the dataset's plan: dedupe, label map, split, shards, report.

Pure Python over small records, so it is deterministic and unit-testable: the same outcomes always
give the same label ids, the same split of every image and the same shard contents.
"""

from __future__ import annotations

import collections
import dataclasses
import hashlib
import math

from data_prep.contract import features
from data_prep.contract.label_map import merge_label_map
from data_prep.ingest_config import IngestConfig
from data_prep.quality import health
from data_prep.reading.image_validation import Reason
from data_prep.reading.inspection import ACCEPTED, IGNORED, REJECTED, FileOutcome
from data_prep.reading.sources import SourceFile
from data_prep.writing.ingest_outputs import BRIGHTNESS, CLASS_HISTOGRAMS

SHARD_PATTERN = "Split-{split}/data_tfrecord-{index:05d}-of-{count:05d}.gz"
# Rejections that say nothing bad about the data; they do not count toward max_reject_fraction.
BENIGN_REASONS = frozenset({Reason.DUPLICATE, Reason.SYMLINK_LOOP})
MIN_SHARD_BYTES = 4 * 1024 * 1024  # below this, more shards only add files, not parallelism
# The report's counts of images per split, class and value of each of HISTOGRAM_FEATURES: the
# data gate compares them with the baseline data's on the classes both have (drift).
HISTOGRAM_FEATURES = (features.HEIGHT, features.WIDTH, BRIGHTNESS)


@dataclasses.dataclass(frozen=True)
class PlannedExample:
    source: SourceFile
    sha256: str
    label_id: int
    image_format: str
    height: int
    width: int
    keeps_original_bytes: bool  # then the writer needs no second decode


@dataclasses.dataclass(frozen=True)
class ShardSpec:
    split: str
    index: int
    count: int
    examples: tuple[PlannedExample, ...]

    @property
    def relative_path(self) -> str:
        return SHARD_PATTERN.format(split=self.split, index=self.index, count=self.count)


@dataclasses.dataclass(frozen=True)
class IngestPlan:
    label_map: dict[str, int]
    shards: tuple[ShardSpec, ...]
    report: dict
    failure: str | None  # why the run must fail; None when the data may be written


def split_of(sha256: str, eval_fraction: float, test_fraction: float) -> str:
    """A stable split from a content hash (a near-duplicate cluster's: see build_plan): the same
    image lands in the same split every run, and copies can never straddle train and eval."""
    digest = hashlib.sha256(f"split:{sha256}".encode()).digest()
    point = int.from_bytes(digest[:8], "big") / 2**64
    if point < eval_fraction:
        return "eval"
    if point < eval_fraction + test_fraction:
        return "test"
    return "train"


def cluster_keys(sha256_by_path: dict[str, str], clusters: list[list[str]]) -> dict[str, str]:
    """Each image's split key: its near-duplicate cluster's smallest content hash, so the cluster
    goes whole to one side; a lone image's own hash. Cluster members absent from sha256_by_path
    (rejected as conflicting labels) are left out."""
    keys = dict(sha256_by_path)
    for members in clusters:
        present = [path for path in members if path in sha256_by_path]
        if present:
            smallest = min(sha256_by_path[path] for path in present)
            keys.update(dict.fromkeys(present, smallest))
    return keys


def build_plan(
    outcomes: list[FileOutcome],
    config: IngestConfig,
    reference_label_map: dict[str, int] | None = None,
    previous_splits: dict[str, str] | None = None,
) -> IngestPlan:
    """reference_label_map: the ids earlier spans gave (see data_prep/contract/label_map.py);
    without one, classes are numbered in name order. previous_splits: the split earlier spans
    gave each image, by sha256 (the previous ingest's source index): an image keeps it, and its
    new near-duplicates follow it."""
    outcomes = sorted(outcomes, key=lambda outcome: outcome.source.relative_path)
    kept, deduped = _dedupe([o for o in outcomes if o.status == ACCEPTED])
    compared = len(kept)
    hashed, pairs = _near_duplicate_pairs(kept, config)
    kept, conflicting = _reject_near_duplicate_conflicts(kept, hashed, pairs)
    groups = _clusters(kept, hashed, pairs)
    final = [o for o in outcomes if o.status != ACCEPTED] + deduped + conflicting + kept
    label_map = merge_label_map(reference_label_map or {}, {o.source.label for o in kept})

    split_of_path = _splits(kept, groups, previous_splits or {}, config)
    by_split = collections.defaultdict(list)
    for outcome in kept:
        by_split[split_of_path[outcome.source.relative_path]].append(outcome)
    shards = []
    for split in sorted(by_split):
        shards.extend(_pack_shards(split, by_split[split], label_map, config))

    report = _report(final, by_split, label_map, config)
    report["near_duplicates"] = [sorted(o.source.relative_path for o in g) for g in groups]
    in_clusters = sum(len(group) for group in groups)
    report["near_duplicate_share"] = {
        "clusters": len(groups),
        "images": in_clusters,
        "fraction": in_clusters / compared if compared else 0.0,  # of the distinct images
    }
    report["odd_images"] = _odd_images(kept)
    report["classes_left_out"] = sorted(
        {o.source.label for o in outcomes if o.source.label is not None} - set(label_map)
    )
    return IngestPlan(label_map, tuple(shards), report, _failure(report, config, by_split))


def _splits(
    kept: list[FileOutcome],
    groups: list[list[FileOutcome]],
    previous: dict[str, str],
    config: IngestConfig,
) -> dict[str, str]:
    """Each kept image's split, by relative path: a manifest's; else the one an earlier span
    gave it; else, in a cluster with a member an earlier span placed, that member's (the
    smallest such sha256's); else split_of its cluster key."""
    sha256_by_path = {o.source.relative_path: o.sha256 for o in kept}
    keys = cluster_keys(sha256_by_path, [[o.source.relative_path for o in g] for g in groups])
    followed = {}
    for group in groups:
        placed = sorted(o.sha256 for o in group if o.sha256 in previous)
        if placed:
            followed.update(
                dict.fromkeys((o.source.relative_path for o in group), previous[placed[0]])
            )
    return {
        o.source.relative_path: o.source.split
        or previous.get(o.sha256)
        or followed.get(o.source.relative_path)
        or split_of(keys[o.source.relative_path], config.eval_fraction, config.test_fraction)
        for o in kept
    }


def _dedupe(accepted: list[FileOutcome]) -> tuple[list[FileOutcome], list[FileOutcome]]:
    """Keeps the first copy of identical bytes under one label; rejects every copy under several."""
    by_hash = collections.defaultdict(list)
    for outcome in accepted:
        by_hash[outcome.sha256].append(outcome)
    kept, rejected = [], []
    for copies in by_hash.values():
        labels = sorted({copy.source.label for copy in copies})
        if len(labels) > 1:
            paths = ", ".join(copy.source.relative_path for copy in copies)
            for copy in copies:
                rejected.append(
                    dataclasses.replace(
                        copy,
                        status=REJECTED,
                        reason=Reason.CONFLICTING_LABEL,
                        detail=f"same bytes labelled {labels}: {paths}",
                    )
                )
            continue
        kept.append(copies[0])
        for copy in copies[1:]:
            rejected.append(
                dataclasses.replace(
                    copy,
                    status=REJECTED,
                    reason=Reason.DUPLICATE,
                    detail=f"duplicate of {copies[0].source.relative_path}",
                )
            )
    kept.sort(key=lambda outcome: outcome.source.relative_path)
    return kept, rejected


def _near_duplicate_pairs(
    kept: list[FileOutcome], config: IngestConfig
) -> tuple[list[FileOutcome], list[tuple[int, int]]]:
    """The images with signals, and the near-duplicate pairs among them (indexes into that
    list; data_prep/quality/health.py)."""
    hashed = [o for o in kept if o.signals is not None]
    pairs = health.near_duplicate_pairs(
        [o.signals.phash for o in hashed],
        [o.signals.gray for o in hashed],
        config.near_duplicate_max_distance,
        config.near_duplicate_max_difference,
    )
    return hashed, pairs


def _reject_near_duplicate_conflicts(
    kept: list[FileOutcome], hashed: list[FileOutcome], pairs: list[tuple[int, int]]
) -> tuple[list[FileOutcome], list[FileOutcome]]:
    """Rejects each image that is itself a near-duplicate of one under another label, naming
    that file, as identical bytes under several labels are: the same picture cannot teach two
    classes. An image merely alike to one of them is kept."""
    others = collections.defaultdict(list)
    for i, j in pairs:
        if hashed[i].source.label != hashed[j].source.label:
            others[i].append(hashed[j])
            others[j].append(hashed[i])
    rejected = [
        dataclasses.replace(
            hashed[i],
            status=REJECTED,
            reason=Reason.CONFLICTING_LABEL,
            detail="near-duplicate of "
            + ", ".join(f"{o.source.relative_path} (labelled {o.source.label})" for o in copies),
        )
        for i, copies in sorted(others.items())
    ]
    gone = {o.source.relative_path for o in rejected}
    return [o for o in kept if o.source.relative_path not in gone], rejected


def _clusters(
    kept: list[FileOutcome], hashed: list[FileOutcome], pairs: list[tuple[int, int]]
) -> list[list[FileOutcome]]:
    """The near-duplicate clusters among the images kept (health.clusters: stars, no chains)."""
    present = {o.source.relative_path for o in kept}
    alive = [i for i, o in enumerate(hashed) if o.source.relative_path in present]
    position = {i: k for k, i in enumerate(alive)}
    kept_pairs = [(position[i], position[j]) for i, j in pairs if i in position and j in position]
    return [
        [hashed[alive[k]] for k in members] for members in health.clusters(len(alive), kept_pairs)
    ]


def _odd_images(kept: list[FileOutcome]) -> dict:
    """cleanvision's odd-image flags per class, and each flagged image: flags, not rejects.
    low_information only where the image is also plainer than its class (health.low_outliers)."""
    sized = health.odd_size_flags([(o.width, o.height) for o in kept])
    plain = health.low_outliers(
        [o.signals.entropy if o.signals else math.inf for o in kept],
        [o.source.label for o in kept],
    )
    per_class = {label: dict.fromkeys(health.FLAGS, 0) for label in {o.source.label for o in kept}}
    flagged = []
    for outcome, odd_size, odd_entropy in zip(kept, sized, plain, strict=True):
        found = outcome.signals.flags if outcome.signals else ()
        flags = tuple(f for f in found if f != "low_information" or odd_entropy) + (
            ("odd_size",) if odd_size else ()
        )
        for flag in flags:
            per_class[outcome.source.label][flag] += 1
        if flags:
            flagged.append({"path": outcome.source.relative_path, "flags": list(flags)})
    return {"per_class": dict(sorted(per_class.items())), "images": flagged}


def shard_count(total_bytes: int, examples: int, config: IngestConfig) -> int:
    """Enough shards to stay near the target size, and at least min_shards of >= 4 MiB each."""
    by_target = math.ceil(total_bytes / config.target_shard_bytes)
    by_parallelism = min(config.min_shards, total_bytes // MIN_SHARD_BYTES)
    return max(1, min(examples, max(by_target, by_parallelism)))


def _pack_shards(
    split: str, outcomes: list[FileOutcome], label_map: dict[str, int], config: IngestConfig
) -> list[ShardSpec]:
    """Round-robin over hash order: shards of near-equal size, classes mixed within each shard."""
    ordered = sorted(outcomes, key=lambda outcome: outcome.sha256)
    total = sum(outcome.encoded_size for outcome in ordered)
    count = shard_count(total, len(ordered), config)
    members = [[] for _ in range(count)]
    for position, outcome in enumerate(ordered):
        members[position % count].append(
            PlannedExample(
                outcome.source,
                outcome.sha256,
                label_map[outcome.source.label],
                outcome.image_format,
                outcome.height,
                outcome.width,
                keeps_original_bytes=not outcome.conversions,
            )
        )
    return [ShardSpec(split, i, count, tuple(examples)) for i, examples in enumerate(members)]


def _report(final, by_split, label_map, config) -> dict:
    statuses = collections.Counter(o.status for o in final)
    per_class = {name: {split: 0 for split in sorted(by_split)} for name in label_map}
    for split, outcomes in by_split.items():
        for outcome in outcomes:
            per_class[outcome.source.label][split] += 1
    conversions = collections.Counter(
        c for o in final if o.status == ACCEPTED for c in o.conversions
    )
    return {
        "input": config.input,
        "totals": {
            "found": len(final),
            "accepted": statuses[ACCEPTED],
            "rejected": statuses[REJECTED],
            "ignored": statuses[IGNORED],
        },
        "accepted_per_split": {split: len(by_split[split]) for split in sorted(by_split)},
        CLASS_HISTOGRAMS: class_histograms(by_split),
        "accepted_per_class": per_class,
        "rejected_per_reason": dict(
            sorted(collections.Counter(o.reason for o in final if o.status == REJECTED).items())
        ),
        "conversions": dict(sorted(conversions.items())),
        "rejected": [
            {"path": o.source.relative_path, "reason": o.reason, "detail": o.detail}
            for o in final
            if o.status == REJECTED
        ],
        "ignored": [o.source.relative_path for o in final if o.status == IGNORED],
        "label_map": label_map,
    }


def class_histograms(by_split: dict[str, list[FileOutcome]]) -> dict:
    """The report's CLASS_HISTOGRAMS of these accepted outcomes by split: {split: {class:
    {feature: {value: images}}}}, values ascending (JSON keys, so strings); an image without
    signals has no brightness."""
    found = {}
    for split in sorted(by_split):
        per_class = collections.defaultdict(lambda: collections.defaultdict(collections.Counter))
        for outcome in by_split[split]:
            counts = per_class[outcome.source.label]
            counts[features.HEIGHT][outcome.height] += 1
            counts[features.WIDTH][outcome.width] += 1
            if outcome.signals:
                counts[BRIGHTNESS][health.brightness_level(outcome.signals)] += 1
        found[split] = {
            label: {
                feature: {str(value): n for value, n in sorted(counts[feature].items())}
                for feature in HISTOGRAM_FEATURES
            }
            for label, counts in sorted(per_class.items())
        }
    return found


def _failure(report: dict, config: IngestConfig, by_split) -> str | None:
    totals = report["totals"]
    images = totals["found"] - totals["ignored"]
    defects = sum(
        count
        for reason, count in report["rejected_per_reason"].items()
        if reason not in BENIGN_REASONS
    )
    if images == 0:
        return f"no image files found under {config.input}"
    if defects / images > config.max_reject_fraction:
        return (
            f"{defects} of {images} image files were rejected "
            f"({defects / images:.1%} > max_reject_fraction {config.max_reject_fraction:.1%}); "
            f"by reason: {report['rejected_per_reason']}"
        )
    if len(report["label_map"]) < 2:
        return f"need at least 2 classes with accepted images, found {list(report['label_map'])}"
    untrained = _classes_without_training_images(report)
    if untrained:
        return (
            "; ".join(untrained)
            + ": every class needs training images; add images or remove the folder"
        )
    wanted = set(config.splits) | set(by_split)
    empty = sorted(split for split in wanted if not by_split.get(split))
    if empty:
        return (
            f"split(s) {empty} received no images ({totals['accepted']} accepted); "
            "add images or change the split fractions"
        )
    return None


def left_out_message(class_name: str) -> str:
    """What the ingest and the run summary say of a class folder with no accepted image."""
    return f"class {class_name!r} has no usable image and was left out"


def tally_line(what: str, counts: dict[str, int]) -> str:
    """Counts by kind on one line, the kinds in name order: `rejected 3: corrupt 1, duplicate 2`."""
    total = sum(counts.values())
    kinds = ", ".join(f"{kind} {count}" for kind, count in sorted(counts.items()) if count)
    return f"{what} {total}: {kinds}" if total else f"{what} 0"


def rejections_line(per_reason: dict[str, int]) -> str:
    """The ingest's rejections on one line, by reason: `rejected 3: corrupt 1, duplicate 2`."""
    return tally_line("rejected", per_reason)


def _classes_without_training_images(report: dict) -> list[str]:
    problems = []
    for name, per_split in report["accepted_per_class"].items():
        if not per_split.get("train"):
            total = sum(per_split.values())
            problems.append(
                f"class {name!r} has {total} accepted image(s), none in the train split"
            )
    return problems
