"""The Beam ingest job on a tiny messy tree: every file accounted for, round trips, determinism."""

import gzip
import hashlib
import json
import os
import pickle
import shutil
import time

import numpy as np
import pytest
import tensorflow as tf
from PIL import Image

from data_prep.contract import features
from data_prep.ingest import IngestFailed, IngestOutputs, previous_splits, run_ingest
from data_prep.ingest_config import IngestConfig
from data_prep.reading.sources import SourceFile
from data_prep.writing.ingest_outputs import read_source_index
from data_prep.writing.plan import IngestPlan, PlannedExample, ShardSpec
from tests.data_prep import image_files

pytestmark = pytest.mark.slow
IN_PROCESS = ["--direct_running_mode=in_memory", "--direct_num_workers=1"]


def _write(root, relative, data):
    path = root / relative
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)


@pytest.fixture(scope="module")
def messy_tree(tmp_path_factory):
    """Good images in 3 classes plus one of every kind of trouble; returns (root, expectations)."""
    root = tmp_path_factory.mktemp("messy")
    for label_index, label in enumerate(("cat", "dog", "fox")):
        for i in range(12):
            _write(root, f"{label}/{i:02d}.jpg", image_files.jpeg(seed=100 * label_index + i))
    rotated, upright = image_files.exif_rotated_jpeg()
    gray = image_files.encode(Image.fromarray(image_files.random_rgb(seed=57)[..., 0]), "PNG")
    webp = image_files.encode(
        Image.fromarray(image_files.random_rgb(seed=58)), "WEBP", lossless=True
    )
    special = {
        "cat/deep/nested/lossless.png": image_files.png(seed=55),
        "dog/rotated.jpg": rotated,
        "dog/gray.png": gray,
        "fox/photo.webp": webp,
        "fox/no_extension": image_files.jpeg(seed=59),
    }
    for relative, data in special.items():
        _write(root, relative, data)
    troubles = {
        "cat/empty.jpg": b"",
        "cat/text.jpg": b"this is not a jpeg",
        "dog/cut.jpg": image_files.jpeg(seed=61, height=64, width=64)[:-300],
        "dog/00_copy.jpg": (root / "dog/00.jpg").read_bytes(),  # duplicate, same label
        "fox/clash.jpg": (root / "cat/01.jpg").read_bytes(),  # same bytes under cat and fox
        "unfiled.jpg": image_files.jpeg(seed=62),  # image outside any class folder
    }
    ignored = {"notes.txt": b"some notes", "cat/.DS_Store": b"\x00\x01", "fox/list.csv": b"a,b"}
    for relative, data in {**troubles, **ignored}.items():
        _write(root, relative, data)
    expected_rejections = {
        "cat/empty.jpg": "empty",
        "cat/text.jpg": "not_an_image",
        "dog/cut.jpg": "truncated",
        "dog/00_copy.jpg": "duplicate",
        "fox/clash.jpg": "conflicting_label",
        "cat/01.jpg": "conflicting_label",
        "unfiled.jpg": "no_label",
    }
    return root, {
        "rejected": expected_rejections,
        "ignored": set(ignored),
        "upright": upright,
        "special": special,
    }


def _ingest(root, out, beam_args=IN_PROCESS, **config):
    settings = {"max_reject_fraction": 0.5, "files_per_bundle": 4, **config}
    return run_ingest(IngestConfig(str(root), **settings), IngestOutputs.under(str(out)), beam_args)


def _records(out, split):
    files = sorted(str(p) for p in (out / f"Split-{split}").glob("*.gz"))
    dataset = tf.data.TFRecordDataset(files, compression_type="GZIP")
    return [tf.io.parse_single_example(r, features.feature_spec()) for r in dataset]


@pytest.fixture(scope="module")
def ingested(messy_tree, tmp_path_factory):
    root, _ = messy_tree
    out = tmp_path_factory.mktemp("out")
    return out, _ingest(root, out)


def test_every_file_is_accounted_for(messy_tree, ingested):
    root, expected = messy_tree
    _, report = ingested
    files_on_disk = sum(1 for p in root.rglob("*") if p.is_file())
    totals = report["totals"]
    assert totals["found"] == files_on_disk
    assert totals["accepted"] + totals["rejected"] + totals["ignored"] == files_on_disk
    assert {r["path"]: r["reason"] for r in report["rejected"]} == expected["rejected"]
    assert set(report["ignored"]) == expected["ignored"]
    assert totals["accepted"] == 36 + len(expected["special"]) - 1  # cat/01.jpg clashes
    assert sum(report["accepted_per_split"].values()) == totals["accepted"]


def test_shards_hold_exactly_the_accepted_images(ingested):
    out, report = ingested
    label_map = json.loads((out / "label_map.json").read_text())
    assert label_map == {"cat": 0, "dog": 1, "fox": 2}
    paths = []
    for split in ("train", "eval"):
        records = _records(out, split)
        assert len(records) == report["accepted_per_split"][split]
        for record in records:
            assert (
                label_map[record[features.LABEL_NAME].numpy().decode()]
                == record[features.LABEL].numpy()
            )
            image = tf.io.decode_image(record[features.IMAGE], channels=3).numpy()
            assert image.shape == (record[features.HEIGHT], record[features.WIDTH], 3)
            paths.append(record[features.SOURCE_PATH].numpy().decode())
    assert len(paths) == len(set(paths)) == report["totals"]["accepted"]
    assert {s["path"] for s in report["shards"]} == {
        str(p.relative_to(out)) for p in out.glob("Split-*/*.gz")
    }


def _by_path(out):
    return {
        r[features.SOURCE_PATH].numpy().decode(): r
        for split in ("train", "eval")
        for r in _records(out, split)
    }


def test_round_trips(messy_tree, ingested):
    root, expected = messy_tree
    out, _ = ingested
    records = _by_path(out)
    untouched = records["cat/00.jpg"]
    assert untouched[features.IMAGE].numpy() == (root / "cat/00.jpg").read_bytes()
    assert (
        untouched[features.SHA256].numpy().decode()
        == hashlib.sha256((root / "cat/00.jpg").read_bytes()).hexdigest()
    )
    lossless = records["cat/deep/nested/lossless.png"]
    np.testing.assert_array_equal(
        tf.io.decode_png(lossless[features.IMAGE]).numpy(), image_files.random_rgb(seed=55)
    )
    webp = records["fox/photo.webp"]
    assert webp[features.IMAGE_FORMAT].numpy() == b"png"
    np.testing.assert_array_equal(
        tf.io.decode_png(webp[features.IMAGE]).numpy(), image_files.random_rgb(seed=58)
    )
    rotated = tf.io.decode_jpeg(records["dog/rotated.jpg"][features.IMAGE]).numpy().astype(int)
    assert rotated.shape == expected["upright"].shape
    assert np.abs(rotated - expected["upright"]).mean() < 8
    assert records["fox/no_extension"][features.LABEL_NAME].numpy() == b"fox"


def test_source_index_lists_exactly_the_accepted_images(messy_tree, ingested):
    root, _ = messy_tree
    out, report = ingested
    index = read_source_index(IngestOutputs.under(str(out)).source_index_path)
    assert [row["path"] for row in index] == sorted(row["path"] for row in index)
    in_shards = {
        record[features.SOURCE_PATH].numpy().decode(): (split, record)
        for split in ("train", "eval")
        for record in _records(out, split)
    }
    assert {row["path"] for row in index} == set(in_shards)
    for row in index:
        split, record = in_shards[row["path"]]
        assert row["split"] == split
        assert row["sha256"] == record[features.SHA256].numpy().decode()
        assert row["label"] == record[features.LABEL_NAME].numpy().decode()
        assert (out / row["shard"]).exists()
        assert row["uri"].endswith(row["path"]) and row["uri"].startswith(str(root))
    assert len(index) == report["totals"]["accepted"]
    assert previous_splits(IngestOutputs.under(str(out)).source_index_path) == {
        row["sha256"]: row["split"] for row in index
    }
    assert previous_splits("") == {}


def test_two_runs_give_the_same_split_and_shard_contents(messy_tree, ingested, tmp_path):
    root, _ = messy_tree
    first, _ = ingested
    _ingest(root, tmp_path / "again")
    first_files = sorted(p.relative_to(first) for p in first.rglob("*.gz"))
    assert first_files == sorted(
        p.relative_to(tmp_path / "again") for p in (tmp_path / "again").rglob("*.gz")
    )
    for relative in first_files:
        assert gzip.decompress((first / relative).read_bytes()) == gzip.decompress(
            (tmp_path / "again" / relative).read_bytes()
        )


def test_reject_threshold_fails_with_a_clear_message_and_still_writes_the_report(
    messy_tree, tmp_path
):
    root, _ = messy_tree
    with pytest.raises(IngestFailed, match=r"image files were rejected .* max_reject_fraction"):
        _ingest(root, tmp_path, max_reject_fraction=0.01)
    report = json.loads((tmp_path / "ingest_report.json").read_text())
    assert report["status"] == "failed"
    assert not list(tmp_path.rglob("*.gz"))  # neither shards nor a source index


def test_rerun_replaces_stale_shards(messy_tree, tmp_path):
    root, _ = messy_tree
    stale = tmp_path / "Split-train/data_tfrecord-00007-of-00009.gz"
    stale.parent.mkdir(parents=True)
    stale.write_bytes(b"old")
    _ingest(root, tmp_path)
    assert not stale.exists()


MULTI_PROCESS = ["--direct_running_mode=multi_processing", "--direct_num_workers=2"]


def test_multi_process_direct_runner(messy_tree, ingested, tmp_path):
    """Worker processes (what the pipeline runs on large inputs, pipeline/config/beam_options.py),
    each
    with its own threads, give the same dataset as one process."""
    root, _ = messy_tree
    first, _ = ingested
    report = _ingest(root, tmp_path, beam_args=MULTI_PROCESS)
    assert report["totals"] == json.loads((first / "ingest_report.json").read_text())["totals"]
    for path in first.rglob("*.gz"):
        assert gzip.decompress(path.read_bytes()) == gzip.decompress(
            (tmp_path / path.relative_to(first)).read_bytes()
        )


# Beam's portable runner with its embedded job service; LOOPBACK runs the SDK workers here.
PORTABLE = ["--runner=PortableRunner", "--job_endpoint=embed", "--environment_type=LOOPBACK"]


def test_portable_runner_gives_the_same_dataset(messy_tree, ingested, tmp_path):
    """The job goes through the Fn API runner protocol that Flink, Spark and Dataflow speak
    (pickled transforms, a job service, SDK workers), not the DirectRunner's shortcuts."""
    root, _ = messy_tree
    first, _ = ingested
    report = _ingest(root, tmp_path, beam_args=PORTABLE)
    expected = json.loads((first / "ingest_report.json").read_text())
    assert report["totals"] == expected["totals"]
    assert report["rejected_per_reason"] == expected["rejected_per_reason"]
    assert sorted(p.relative_to(first) for p in first.rglob("*.gz")) == sorted(
        p.relative_to(tmp_path) for p in tmp_path.rglob("*.gz")
    )
    for path in first.rglob("*.gz"):
        assert gzip.decompress(path.read_bytes()) == gzip.decompress(
            (tmp_path / path.relative_to(first)).read_bytes()
        )


def test_manifest_input(messy_tree, tmp_path):
    root, _ = messy_tree
    rows = (
        ["path,label,split"]
        + [f"{root}/cat/{i:02d}.jpg,cat,train" for i in range(4)]
        + [f"{root}/dog/{i:02d}.jpg,dog,eval" for i in range(3)]
        + [f"{root}/dog/03.jpg,dog,train"]  # every class needs training images
    )
    (tmp_path / "m.csv").write_text("\n".join(rows) + "\n")
    shutil.rmtree(tmp_path / "out", ignore_errors=True)
    report = _ingest(tmp_path / "m.csv", tmp_path / "out")
    assert report["accepted_per_split"] == {"eval": 3, "train": 5}


def _slow_writer(spec, label_names, limits, examples_dir):
    time.sleep(0.3)  # long enough that the second shard starts while the first is written
    return {"path": spec.relative_path, "labels": label_names, "pid": os.getpid()}


def _spec(split: str, *names: str) -> ShardSpec:
    examples = tuple(
        PlannedExample(SourceFile(name, f"/in/{name}", "cat"), f"sha-{name}", 0, "jpeg", 4, 4, True)
        for name in names
    )
    return ShardSpec(split, 0, 1, examples)


def test_shards_are_written_several_at_once(monkeypatch):
    """Each shard in a child process of its own: two shards, two children at once; each writer
    returns its shard's rows of the source index, sorted by path."""
    from data_prep import ingest
    from data_prep.runtime import parallel

    monkeypatch.setattr(ingest, "write_shard", _slow_writer)  # pickled by name to the child
    parallel.release_pools()  # children forked with the patch
    writer = ingest._WriteShards(IngestConfig("in"), IngestOutputs.under("out"), workers=2)
    summary = IngestPlan({"cat": 0}, (), {}, None)
    specs = _spec("train", "cat/b.jpg", "cat/a.jpg"), _spec("eval", "cat/c.jpg")
    shards = [ingest._Packed.of((spec,)) for spec in specs]
    writer.start_bundle()
    written = [*writer.process(shards[0], summary), *writer.process(shards[1], summary)]
    written += [value.value for value in writer.finish_bundle()]  # windowed, for Beam
    parallel.release_pools()
    results = [result for result, _ in written]
    assert [(r["path"], r["labels"]) for r in results] == [
        (spec.relative_path, {0: "cat"}) for spec in specs
    ]
    assert len({r["pid"] for r in results} - {os.getpid()}) == 2
    rows = [[json.loads(line) for _, line in index.unpack()] for _, index in written]
    assert [[(row["path"], row["split"], row["label"]) for row in shard] for shard in rows] == [
        [("cat/a.jpg", "train", "cat"), ("cat/b.jpg", "train", "cat")],
        [("cat/c.jpg", "eval", "cat")],
    ]


def test_a_packed_value_pickles_deflated_and_back():
    from data_prep.ingest import _Packed

    sources = tuple(
        SourceFile(f"cat/{i:06d}.jpg", f"/data/photos/cat/{i:06d}.jpg", "cat") for i in range(500)
    )
    packed = _Packed.of(sources)
    assert packed.count == 500
    assert pickle.loads(pickle.dumps(packed)).unpack() == sources
    assert len(pickle.dumps(packed)) < len(pickle.dumps(sources)) / 4  # repeated paths deflate well
