"""The write pass: what it writes is what inspection validated, or nothing."""

import hashlib

import pytest
import tensorflow as tf

from data_prep.contract import features
from data_prep.reading.image_validation import ImageLimits
from data_prep.reading.sources import SourceFile
from data_prep.writing.plan import PlannedExample, ShardSpec
from data_prep.writing.shards import IngestError, write_shard
from tests.data_prep import image_files


def _planned(tmp_path, name: str, data: bytes) -> PlannedExample:
    path = tmp_path / "images" / "cat" / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    source = SourceFile(f"cat/{name}", str(path), "cat")
    sha256 = hashlib.sha256(data).hexdigest()
    return PlannedExample(source, sha256, 0, "jpeg", 24, 32, keeps_original_bytes=True)


def _spec(*examples: PlannedExample) -> ShardSpec:
    return ShardSpec("train", 0, 1, examples)


def test_writes_every_planned_file_in_order(tmp_path):
    planned = [_planned(tmp_path, f"{i}.jpg", image_files.jpeg(seed=i)) for i in range(3)]
    result = write_shard(_spec(*planned), {0: "cat"}, ImageLimits(), str(tmp_path / "out"))
    shard = tmp_path / "out" / result["path"]
    records = tf.data.TFRecordDataset([str(shard)], compression_type="GZIP")
    paths = [
        tf.io.parse_single_example(r, features.feature_spec())[features.SOURCE_PATH].numpy()
        for r in records
    ]
    assert paths == [b"cat/0.jpg", b"cat/1.jpg", b"cat/2.jpg"]
    assert (result["examples"], result["bytes"]) == (3, shard.stat().st_size)


def test_a_file_changed_since_inspection_stops_the_shard_and_leaves_no_file(tmp_path):
    planned = [_planned(tmp_path, f"{i}.jpg", image_files.jpeg(seed=i)) for i in range(3)]
    # Changed after inspection hashed it: the new bytes were never validated.
    (tmp_path / "images" / "cat" / "1.jpg").write_bytes(image_files.jpeg(seed=99))
    with pytest.raises(IngestError, match="changed_during_ingest: .*1.jpg"):
        write_shard(_spec(*planned), {0: "cat"}, ImageLimits(), str(tmp_path / "out"))
    assert not [path for path in (tmp_path / "out").rglob("*") if path.is_file()]


def test_a_converted_image_is_encoded_again_without_its_health_signals(tmp_path, monkeypatch):
    import dataclasses

    from PIL import Image

    from data_prep.quality import health

    rgba = Image.new("RGBA", (32, 24), (200, 30, 30, 128))
    planned = _planned(tmp_path, "0.png", image_files.encode(rgba, "PNG"))
    planned = dataclasses.replace(planned, image_format="png", keeps_original_bytes=False)

    def taken_again(rgb):
        raise AssertionError("the signals were taken at inspection")

    monkeypatch.setattr(health, "image_signals", taken_again)
    result = write_shard(_spec(planned), {0: "cat"}, ImageLimits(), str(tmp_path / "out"))
    assert result["examples"] == 1
