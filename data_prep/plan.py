"""Turns every file's outcome into the dataset's plan: dedupe, label map, split, shards, report.

Pure Python over small records, so it is deterministic and unit-testable: the same outcomes always
give the same label ids, the same split of every image and the same shard contents.
"""

from __future__ import annotations

import collections
import dataclasses
import hashlib
import math

from data_prep.contract.label_map import merge_label_map
from data_prep.image_validation import Reason
from data_prep.ingest_config import IngestConfig
from data_prep.inspection import ACCEPTED, IGNORED, REJECTED, FileOutcome
from data_prep.sources import SourceFile

SHARD_PATTERN = "Split-{split}/data_tfrecord-{index:05d}-of-{count:05d}.gz"
# Rejections that say nothing bad about the data; they do not count toward max_reject_fraction.
BENIGN_REASONS = frozenset({Reason.DUPLICATE, Reason.SYMLINK_LOOP})
MIN_SHARD_BYTES = 4 * 1024 * 1024  # below this, more shards only add files, not parallelism


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
    """A stable split from the content hash: the same image lands in the same split every run,
    and byte-identical copies can never straddle train and eval."""
    digest = hashlib.sha256(f"split:{sha256}".encode()).digest()
    point = int.from_bytes(digest[:8], "big") / 2**64
    if point < eval_fraction:
        return "eval"
    if point < eval_fraction + test_fraction:
        return "test"
    return "train"


def build_plan(
    outcomes: list[FileOutcome],
    config: IngestConfig,
    reference_label_map: dict[str, int] | None = None,
) -> IngestPlan:
    """reference_label_map: the ids earlier spans gave (see data_prep/contract/label_map.py);
    without
    one, classes are numbered in name order."""
    outcomes = sorted(outcomes, key=lambda outcome: outcome.source.relative_path)
    kept, deduped = _dedupe([o for o in outcomes if o.status == ACCEPTED])
    final = [o for o in outcomes if o.status != ACCEPTED] + deduped + kept
    label_map = merge_label_map(reference_label_map or {}, {o.source.label for o in kept})

    by_split = collections.defaultdict(list)
    for outcome in kept:
        split = outcome.source.split or split_of(
            outcome.sha256, config.eval_fraction, config.test_fraction
        )
        by_split[split].append(outcome)
    shards = []
    for split in sorted(by_split):
        shards.extend(_pack_shards(split, by_split[split], label_map, config))

    report = _report(final, by_split, label_map, config)
    report["classes_left_out"] = sorted(
        {o.source.label for o in outcomes if o.source.label is not None} - set(label_map)
    )
    return IngestPlan(label_map, tuple(shards), report, _failure(report, config, by_split))


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


def _classes_without_training_images(report: dict) -> list[str]:
    problems = []
    for name, per_split in report["accepted_per_class"].items():
        if not per_split.get("train"):
            total = sum(per_split.values())
            problems.append(
                f"class {name!r} has {total} accepted image(s), none in the train split"
            )
    return problems
