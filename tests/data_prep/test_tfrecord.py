import tensorflow as tf

from data_prep.tfrecord import GzipTFRecordWriter


def test_records_read_back_with_tensorflow(tmp_path):
    records = [b"", b"a", bytes(range(256)) * 300, b"last"]
    path = str(tmp_path / "deep" / "shard.gz")
    with GzipTFRecordWriter(path) as writer:
        for record in records:
            writer.write(record)
    read = [r.numpy() for r in tf.data.TFRecordDataset(path, compression_type="GZIP")]
    assert read == records
    assert sorted(p.name for p in (tmp_path / "deep").iterdir()) == ["shard.gz"]


def test_same_records_give_identical_files(tmp_path):
    for name in ("one.gz", "two.gz"):
        with GzipTFRecordWriter(str(tmp_path / name)) as writer:
            writer.write(b"payload")
    assert (tmp_path / "one.gz").read_bytes() == (tmp_path / "two.gz").read_bytes()


def test_failed_write_leaves_no_file(tmp_path):
    try:
        with GzipTFRecordWriter(str(tmp_path / "shard.gz")) as writer:
            writer.write(b"partial")
            raise RuntimeError("worker died")
    except RuntimeError:
        pass
    assert list(tmp_path.iterdir()) == []
