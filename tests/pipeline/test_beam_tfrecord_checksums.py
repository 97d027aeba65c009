"""pipeline/beam_tfrecord_checksums.py: Beam's TFRecords checked by google-crc32c, with the same
checksums as before, only inside, and inside every local run."""

import io

import crcmod.predefined
import google_crc32c
import pytest
import tensorflow as tf
from apache_beam.io import tfrecordio

from pipeline.beam_tfrecord_checksums import hardware_checksums
from pipeline.runners import local as local_runner
from tests.pipeline.tiny_pipeline import tiny_config, write_images

RECORDS = [b"", b"x", bytes(range(256)) * 40]


def _beam_crc32c():
    return tfrecordio._default_crc32c_fn.fn  # noqa: SLF001 - the slot the module fills


def test_the_same_checksums_as_crcmod():
    crcmod_crc32c = crcmod.predefined.mkPredefinedCrcFun("crc-32c")
    for record in RECORDS:
        assert google_crc32c.value(record) == crcmod_crc32c(record)


def test_swapped_only_inside(monkeypatch):
    monkeypatch.setattr(tfrecordio._default_crc32c_fn, "fn", None)  # noqa: SLF001
    with hardware_checksums():
        assert _beam_crc32c() is google_crc32c.value
    assert _beam_crc32c() is None


def test_beam_writes_what_tensorflow_reads_and_reads_what_tensorflow_writes(tmp_path):
    """TensorFlow checks every checksum of the records Beam wrote inside, and Beam every one of
    the records TensorFlow wrote."""
    written = io.BytesIO()
    with hardware_checksums():
        for record in RECORDS:
            tfrecordio._TFRecordUtil.write_record(written, record)  # noqa: SLF001
    beam_file = tmp_path / "beam.tfrecord"
    beam_file.write_bytes(written.getvalue())
    assert list(tf.data.TFRecordDataset(str(beam_file)).as_numpy_iterator()) == RECORDS

    tf_file = tmp_path / "tf.tfrecord"
    with tf.io.TFRecordWriter(str(tf_file)) as writer:
        for record in RECORDS:
            writer.write(record)
    with hardware_checksums(), open(tf_file, "rb") as handle:
        read = [tfrecordio._TFRecordUtil.read_record(handle) for _ in RECORDS]  # noqa: SLF001
    assert read == RECORDS


def test_a_local_run_checks_beam_records_in_hardware(tmp_path, monkeypatch):
    """run_local runs the pipeline inside hardware_checksums (the DAG runner stops the run at
    once, as Ctrl-C would, once it has seen which checksum Beam would use)."""
    seen = []

    class StoppingRunner:
        def run_with_ir(self, ir):
            seen.append(_beam_crc32c())
            raise KeyboardInterrupt

    monkeypatch.setattr(local_runner, "LocalDagRunner", StoppingRunner)
    config = tiny_config(write_images(tmp_path / "images"), tmp_path / "build")
    with pytest.raises(KeyboardInterrupt):
        local_runner.run_local(config)
    assert seen == [google_crc32c.value]
