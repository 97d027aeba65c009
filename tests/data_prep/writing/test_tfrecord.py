import tensorflow as tf

from data_prep.writing.tfrecord import GzipTFRecordWriter, shard_problem


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


def _shard(path, records=5) -> str:
    with GzipTFRecordWriter(str(path)) as writer:
        for index in range(records):
            writer.write(bytes([index]) * 1000)
    return str(path)


def test_a_whole_shard_has_no_problem(tmp_path):
    assert shard_problem(_shard(tmp_path / "ok.gz")) is None


def test_a_flipped_bit_names_the_record(tmp_path):
    path = _shard(tmp_path / "flipped.gz")
    data = bytearray((tmp_path / "flipped.gz").read_bytes())
    data[len(data) // 2] ^= 0x10  # inside a record's data: the deflate blocks are stored
    (tmp_path / "flipped.gz").write_bytes(bytes(data))
    assert shard_problem(path).startswith("corrupted record at 2032: its data fails its CRC")


def test_a_truncated_shard_is_found(tmp_path):
    path = _shard(tmp_path / "cut.gz")
    data = (tmp_path / "cut.gz").read_bytes()
    (tmp_path / "cut.gz").write_bytes(data[: len(data) // 2])
    problem = shard_problem(path)
    assert problem is not None and ("cut short" in problem or "gzip stream" in problem)


def test_bytes_that_are_no_gzip_stream_are_found(tmp_path):
    (tmp_path / "text.gz").write_bytes(b"not gzip at all")
    assert shard_problem(str(tmp_path / "text.gz")).startswith("gzip stream unreadable")
