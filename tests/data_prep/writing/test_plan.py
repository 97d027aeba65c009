import collections
import dataclasses
import random

from data_prep.ingest_config import IngestConfig
from data_prep.quality import health
from data_prep.reading.image_validation import Reason
from data_prep.reading.inspection import ACCEPTED, IGNORED, REJECTED, FileOutcome
from data_prep.reading.sources import SourceFile
from data_prep.writing.ingest_outputs import CLASS_HISTOGRAMS
from data_prep.writing.plan import (
    build_plan,
    rejections_line,
    shard_count,
    split_of,
)

CONFIG = IngestConfig(input="in", target_shard_bytes=1024 * 1024, min_shards=1)


def accepted(path, label, sha, size=1000, split=None):
    return FileOutcome(
        SourceFile(path, "/in/" + path, label, split), ACCEPTED, sha256=sha, encoded_size=size
    )


def many(count, size=1000):
    return [accepted(f"c{i % 3}/{i}.jpg", f"c{i % 3}", f"{i:064x}", size) for i in range(count)]


def test_duplicates_kept_once_and_conflicts_rejected_everywhere():
    outcomes = many(30) + [
        accepted("c0/copy.jpg", "c0", f"{0:064x}"),  # same bytes, same label as c0/0.jpg
        accepted("c1/clash.jpg", "c1", f"{3:064x}"),  # same bytes as c0/3.jpg, other label
    ]
    plan = build_plan(outcomes, CONFIG)
    rejected = {r["path"]: r for r in plan.report["rejected"]}
    assert rejected["c0/copy.jpg"]["reason"] == Reason.DUPLICATE
    assert rejected["c0/copy.jpg"]["detail"] == "duplicate of c0/0.jpg"
    assert (
        rejected["c0/3.jpg"]["reason"]
        == rejected["c1/clash.jpg"]["reason"]
        == (Reason.CONFLICTING_LABEL)
    )
    planned = [e.source.relative_path for s in plan.shards for e in s.examples]
    assert "c0/0.jpg" in planned and "c0/copy.jpg" not in planned and "c0/3.jpg" not in planned
    assert plan.report["totals"] == {"found": 32, "accepted": 29, "rejected": 3, "ignored": 0}


def test_counts_add_up_and_label_map_is_sorted():
    outcomes = many(40) + [
        FileOutcome(SourceFile("c0/bad.jpg", "/in/c0/bad.jpg", "c0"), REJECTED, Reason.TRUNCATED),
        FileOutcome(SourceFile("notes.txt", "/in/notes.txt", None), IGNORED),
    ]
    plan = build_plan(outcomes, CONFIG)
    totals = plan.report["totals"]
    assert totals["found"] == totals["accepted"] + totals["rejected"] + totals["ignored"] == 42
    assert plan.label_map == {"c0": 0, "c1": 1, "c2": 2}
    assert sum(plan.report["accepted_per_split"].values()) == 40
    assert plan.report["ignored"] == ["notes.txt"]
    assert plan.failure is None


def test_split_is_a_stable_function_of_content():
    shas = [f"{i:064x}" for i in range(2000)]
    splits = collections.Counter(split_of(sha, 0.2, 0.1) for sha in shas)
    assert abs(splits["eval"] / 2000 - 0.2) < 0.03 and abs(splits["test"] / 2000 - 0.1) < 0.03
    assert [split_of(sha, 0.2, 0.1) for sha in shas] == [split_of(sha, 0.2, 0.1) for sha in shas]


def test_manifest_split_wins_over_hash():
    outcomes = many(20) + [accepted("c0/fixed.jpg", "c0", "f" * 64, split="eval")]
    plan = build_plan(outcomes, CONFIG)
    eval_paths = [
        e.source.relative_path for s in plan.shards if s.split == "eval" for e in s.examples
    ]
    assert "c0/fixed.jpg" in eval_paths


def test_shards_are_balanced_near_the_target_size_and_mix_classes():
    plan = build_plan(many(1000, size=10_000), CONFIG)  # ~10 MB in all, 1 MiB target
    train = [s for s in plan.shards if s.split == "train"]
    sizes = [len(s.examples) * 10_000 for s in train]
    assert len(train) == -(-sum(sizes) // CONFIG.target_shard_bytes)
    assert max(sizes) <= CONFIG.target_shard_bytes and max(sizes) - min(sizes) <= 10_000
    assert len({e.label_id for e in train[0].examples}) == 3
    assert train[0].relative_path == f"Split-train/data_tfrecord-00000-of-{len(train):05d}.gz"


def test_plan_is_independent_of_outcome_order():
    outcomes = many(100)
    assert build_plan(outcomes, CONFIG) == build_plan(outcomes[::-1], CONFIG)


def test_too_many_rejects_fail_naming_the_reasons():
    bad = [
        FileOutcome(SourceFile(f"c0/{i}.jpg", "x", "c0"), REJECTED, Reason.CORRUPT)
        for i in range(5)
    ]
    plan = build_plan(many(20) + bad, dataclasses.replace(CONFIG, max_reject_fraction=0.1))
    assert "5 of 25 image files were rejected" in plan.failure
    assert "corrupt" in plan.failure
    assert build_plan(many(20) + bad, CONFIG).failure is not None
    assert (
        build_plan(many(20) + bad, dataclasses.replace(CONFIG, max_reject_fraction=0.3)).failure
        is None
    )


def test_duplicates_do_not_count_as_defects():
    copies = [accepted(f"c0/copy{i}.jpg", "c0", f"{0:064x}") for i in range(10)]
    assert build_plan(many(20) + copies, CONFIG).failure is None


def test_unusable_datasets_fail_clearly():
    assert (
        "need at least 2 classes"
        in build_plan(
            [accepted(f"c0/{i}.jpg", "c0", f"{i:064x}") for i in range(30)], CONFIG
        ).failure
    )
    assert "received no images" in build_plan(many(2), CONFIG).failure


def test_shard_count_keeps_target_size_and_a_floor_for_parallelism():
    config = dataclasses.replace(CONFIG, target_shard_bytes=100 * 2**20, min_shards=8)
    assert shard_count(5 * 2**20, 1000, config) == 1  # too small to split usefully
    assert shard_count(20 * 2**20, 1000, config) == 5  # 4 MiB floor per shard
    assert shard_count(175 * 2**20, 5000, config) == 8  # parallelism floor
    assert shard_count(2000 * 2**20, 50000, config) == 20  # target size rules
    assert shard_count(50 * 2**20, 3, config) == 3  # never more shards than examples


def test_a_class_folder_with_no_usable_image_is_left_out_and_named():
    from data_prep.writing.plan import left_out_message

    outcomes = many(30) + [
        FileOutcome(SourceFile("docs/README.txt", "/in/docs/README.txt", "docs"), IGNORED),
        FileOutcome(SourceFile("broken/a.jpg", "/in/broken/a.jpg", "broken"), REJECTED, "corrupt"),
    ]
    plan = build_plan(outcomes, dataclasses.replace(CONFIG, max_reject_fraction=0.5))
    assert plan.failure is None
    assert plan.label_map == {"c0": 0, "c1": 1, "c2": 2}
    assert plan.report["classes_left_out"] == ["broken", "docs"]
    assert left_out_message("docs") == "class 'docs' has no usable image and was left out"


def test_a_class_with_no_training_image_fails_at_the_ingest_naming_it():
    lone = accepted("owl/only.jpg", "owl", "f" * 64, split="eval")
    plan = build_plan(many(30) + [lone], CONFIG)
    assert plan.failure == (
        "class 'owl' has 1 accepted image(s), none in the train split: every class needs "
        "training images; add images or remove the folder"
    )


def test_a_reference_label_map_keeps_known_ids():
    plan = build_plan(many(30), CONFIG, reference_label_map={"c2": 0, "c0": 1, "gone": 2})
    assert plan.label_map == {"c2": 0, "c0": 1, "c1": 3}
    ids = {e.source.label: e.label_id for s in plan.shards for e in s.examples}
    assert ids == {"c2": 0, "c0": 1, "c1": 3}


def picture(seed: int) -> bytes:
    """A thumbnail of noise: the same seed is the same picture, others are far from it."""
    return random.Random(seed).randbytes(health.GRAY_SIDE**2)


def hashed(path, label, sha, phash, size=(500, 375), flags=(), seed=None, entropy=7.0):
    return dataclasses.replace(
        accepted(path, label, sha),
        width=size[0],
        height=size[1],
        signals=health.ImageSignals(
            phash, picture(phash if seed is None else seed), entropy, flags
        ),
    )


def test_near_duplicate_clusters_never_straddle_the_split():
    rng = random.Random(0)
    outcomes, clusters = [], []
    for c in range(60):
        base = rng.getrandbits(64)
        members = [f"c{c % 3}/{c}_{k}.jpg" for k in range(3)]
        clusters.append(members)
        outcomes += [
            hashed(path, f"c{c % 3}", f"{rng.getrandbits(256):064x}", base ^ (1 << k), seed=base)
            for k, path in enumerate(members)
        ]
    plan = build_plan(outcomes, dataclasses.replace(CONFIG, eval_fraction=0.5))
    split_of_path = {e.source.relative_path: s.split for s in plan.shards for e in s.examples}
    assert sorted(plan.report["near_duplicates"]) == sorted(clusters)
    assert all(len({split_of_path[p] for p in members}) == 1 for members in clusters)
    assert {split_of_path[m[0]] for m in clusters} == {"train", "eval"}


def test_a_cluster_goes_where_its_smallest_hash_sends_it_and_singletons_keep_theirs():
    low, high = "1" + "0" * 63, "f" * 64
    outcomes = many(30) + [
        hashed("c0/a.jpg", "c0", high, 0b1, seed=7),
        hashed("c0/b.jpg", "c0", low, 0b11, seed=7),
    ]
    plan = build_plan(outcomes, CONFIG)
    split_of_path = {e.source.relative_path: s.split for s in plan.shards for e in s.examples}
    expected = split_of(low, CONFIG.eval_fraction, CONFIG.test_fraction)
    assert split_of_path["c0/a.jpg"] == split_of_path["c0/b.jpg"] == expected
    for i in range(30):
        assert split_of_path[f"c{i % 3}/{i}.jpg"] == split_of(f"{i:064x}", 0.2, 0.0)


def test_near_duplicates_under_two_labels_are_conflicts_naming_each_other():
    outcomes = many(30) + [
        hashed("c0/cat.jpg", "c0", "a" * 64, 0xF0F0, seed=5),
        hashed("c1/cat_resized.jpg", "c1", "b" * 64, 0xF0F1, seed=5),
    ]
    plan = build_plan(outcomes, CONFIG)
    rejected = {r["path"]: r for r in plan.report["rejected"]}
    assert rejected["c0/cat.jpg"]["reason"] == Reason.CONFLICTING_LABEL
    assert rejected["c0/cat.jpg"]["detail"] == "near-duplicate of c1/cat_resized.jpg (labelled c1)"
    assert rejected["c1/cat_resized.jpg"]["detail"] == "near-duplicate of c0/cat.jpg (labelled c0)"
    assert plan.report["near_duplicates"] == []


def test_only_the_copies_under_another_label_are_conflicts_not_their_chain(monkeypatch):
    # a ~ b ~ c under c0 and d, a copy of c, under c1: only c and d conflict; a and b stay,
    # and they are still a pair.
    outcomes = many(30) + [
        hashed(f"{label}/{name}.jpg", label, name * 64, k)
        for k, (name, label) in enumerate([("a", "c0"), ("b", "c0"), ("c", "c0"), ("d", "c1")])
    ]
    monkeypatch.setattr(health, "near_duplicate_pairs", lambda *_: [(0, 1), (1, 2), (2, 3)])
    plan = build_plan(outcomes, CONFIG)
    assert plan.report["rejected_per_reason"] == {Reason.CONFLICTING_LABEL: 2}
    assert sorted(r["path"] for r in plan.report["rejected"]) == ["c0/c.jpg", "c1/d.jpg"]
    assert plan.report["near_duplicates"] == [["c0/a.jpg", "c0/b.jpg"]]


def test_odd_images_are_flagged_per_class_and_kept():
    rng = random.Random(1)
    outcomes = [
        hashed(f"c{i % 2}/{i}.jpg", f"c{i % 2}", f"{i:064x}", rng.getrandbits(64), (500 + i, 375))
        for i in range(20)
    ] + [
        hashed("c0/night.jpg", "c0", "d" * 64, 2**64 - 1, flags=("dark",)),
        hashed("c1/huge.jpg", "c1", "e" * 64, 0, size=(6000, 4000)),
    ]
    plan = build_plan(outcomes, CONFIG)
    odd = plan.report["odd_images"]
    assert odd["per_class"]["c0"]["dark"] == 1 and odd["per_class"]["c1"]["odd_size"] == 1
    assert odd["images"] == [
        {"path": "c0/night.jpg", "flags": ["dark"]},
        {"path": "c1/huge.jpg", "flags": ["odd_size"]},
    ]
    assert plan.report["totals"]["accepted"] == 22


def test_rejections_are_one_line_by_reason():
    per_reason = {"duplicate": 2, "corrupt": 2, "conflicting_label": 30}
    expected = "rejected 34: conflicting_label 30, corrupt 2, duplicate 2"
    assert rejections_line(per_reason) == expected
    assert rejections_line({}) == "rejected 0"


def splits_by_sha(plan) -> dict[str, str]:
    return {e.sha256: s.split for s in plan.shards for e in s.examples}


def test_no_image_changes_split_across_spans_and_new_copies_follow_their_original():
    rng = random.Random(3)

    def image(name, seed):
        label = f"c{seed % 3}"
        sha = f"{rng.getrandbits(256):064x}"
        return hashed(f"{label}/{name}.jpg", label, sha, rng.getrandbits(64), seed=seed)

    first = [image(f"a{k}", k) for k in range(300)]
    # Span 2: 30 removed, 20 edited (new bytes under the old name, another picture), 100 new,
    # and copies of 30 kept images (the same picture, other bytes) that would pull their
    # cluster's split key elsewhere.
    second = first[30:280] + [image(f"a{k}", 1000 + k) for k in range(280, 300)]
    second += [image(f"b{k}", 2000 + k) for k in range(100)]
    copies = [image(f"copy{k}", k) for k in range(30, 60)]
    second += copies
    third = second[20:] + [image(f"c{k}", 3000 + k) for k in range(100)]
    config = dataclasses.replace(CONFIG, eval_fraction=0.3)
    previous: dict[str, str] = {}
    moves = 0
    for span in (first, second, third):
        placed = splits_by_sha(build_plan(span, config, previous_splits=previous))
        moves += sum(placed[sha] != split for sha, split in previous.items() if sha in placed)
        previous = placed
    assert moves == 0
    second_splits = splits_by_sha(
        build_plan(second, config, previous_splits=splits_by_sha(build_plan(first, config)))
    )
    for k, copy in enumerate(copies, start=30):
        assert second_splits[copy.sha256] == second_splits[first[k].sha256]
    # Without the earlier spans' splits, the copies move some of their originals.
    alone = splits_by_sha(build_plan(second, config))
    first_splits = splits_by_sha(build_plan(first, config))
    assert any(alone[o.sha256] != first_splits[o.sha256] for o in first[30:60])


def test_low_information_is_flagged_only_where_plainer_than_its_class():
    rng = random.Random(2)
    # Class c0: thin strokes, every image below cleanvision's entropy threshold; c1: photos
    # with one blank image among them.
    outcomes = (
        [
            hashed(
                f"c0/{i}.png",
                "c0",
                f"{i:064x}",
                rng.getrandbits(64),
                flags=("low_information",),
                entropy=2.0 + 0.01 * i,
            )
            for i in range(20)
        ]
        + [
            hashed(
                f"c1/{i}.jpg", "c1", f"{100 + i:064x}", rng.getrandbits(64), entropy=7.0 + 0.02 * i
            )
            for i in range(20)
        ]
        + [hashed("c1/blank.jpg", "c1", "f" * 64, 0, flags=("low_information",), entropy=0.5)]
    )
    odd = build_plan(outcomes, CONFIG).report["odd_images"]
    assert odd["images"] == [{"path": "c1/blank.jpg", "flags": ["low_information"]}]


def test_each_split_counts_each_class_s_images_by_size_and_mean_brightness():
    def lit(i, level):
        """An image of mean brightness `level` and sides 40 + i % 3: half its pixels 20 levels
        darker, half 20 lighter, in an order of its own (so no two are near-duplicates)."""
        pixels = [level - 20, level + 20] * (health.GRAY_SIDE**2 // 2)
        random.Random(i).shuffle(pixels)
        side = 40 + i % 3
        found = hashed(f"c{i % 2}/{i}.jpg", f"c{i % 2}", f"{i:064x}", i, size=(side, side))
        return dataclasses.replace(
            found, signals=dataclasses.replace(found.signals, gray=bytes(pixels))
        )

    unsignalled = [
        dataclasses.replace(
            accepted(f"c0/x{i}.jpg", "c0", f"{i:064x}".replace("0", "e")), height=9, width=9
        )
        for i in range(3)
    ]
    outcomes = [lit(i, 40 if i < 10 else 200) for i in range(40)] + unsignalled
    plan = build_plan(outcomes, CONFIG)
    split_of_path = {e.source.relative_path: s.split for s in plan.shards for e in s.examples}
    counted = plan.report[CLASS_HISTOGRAMS]
    assert set(counted) == {"train", "eval"}
    for split, per_class in counted.items():
        for label in ("c0", "c1"):
            members = [
                i
                for i in range(40)
                if f"c{i % 2}" == label and split_of_path[f"{label}/{i}.jpg"] == split
            ]
            unlit = [
                p for p in split_of_path if p.startswith(f"{label}/x") and split_of_path[p] == split
            ]
            brightness = collections.Counter(str(40 if i < 10 else 200) for i in members)
            sides = collections.Counter([str(40 + i % 3) for i in members] + ["9"] * len(unlit))
            assert per_class.get(label, {}) == (
                {
                    "height": dict(sorted(sides.items())),
                    "width": dict(sorted(sides.items())),
                    "brightness": dict(sorted(brightness.items())),
                }
                if members or unlit
                else {}
            )
