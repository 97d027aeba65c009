"""read_source: the whole file up to the limit, whatever the chunk size, and never more."""

import os
import types

from data_prep.reading import files, inspection
from data_prep.reading.image_validation import ImageLimits, Reason
from data_prep.reading.sources import SourceFile
from tests.data_prep import image_files


def _source(tmp_path, size: int) -> SourceFile:
    path = tmp_path / "file.bin"
    path.write_bytes(bytes(range(256)) * (size // 256) + bytes(size % 256))
    return SourceFile("file.bin", str(path), None)


def test_reads_a_file_larger_than_one_chunk_whole(tmp_path, monkeypatch):
    monkeypatch.setattr(files, "_READ_CHUNK_BYTES", 1000)
    source = _source(tmp_path, 4321)
    assert inspection.read_source(source, 10_000) == (tmp_path / "file.bin").read_bytes()


def test_reads_at_most_the_limit(tmp_path, monkeypatch):
    monkeypatch.setattr(files, "_READ_CHUNK_BYTES", 1000)
    source = _source(tmp_path, 4321)
    for limit in (1, 999, 1000, 2500, 4320):
        assert inspection.read_source(source, limit) == (tmp_path / "file.bin").read_bytes()[:limit]


def test_an_empty_file_reads_as_no_bytes(tmp_path):
    assert inspection.read_source(_source(tmp_path, 0), 100) == b""


def test_a_local_file_that_grew_since_its_size_was_read_is_read_whole(tmp_path, monkeypatch):
    """The size fstat reports only sizes the first read: bytes beyond it are read too."""
    monkeypatch.setattr(files, "_READ_CHUNK_BYTES", 1000)
    real_fstat = os.fstat

    def stale_fstat(fd):
        return types.SimpleNamespace(st_mode=real_fstat(fd).st_mode, st_size=10)

    monkeypatch.setattr(os, "fstat", stale_fstat)
    source = _source(tmp_path, 4321)
    assert inspection.read_source(source, 10_000) == (tmp_path / "file.bin").read_bytes()
    assert inspection.read_source(source, 2500) == (tmp_path / "file.bin").read_bytes()[:2500]


def test_examine_source_gives_the_image_of_a_file_outside_any_class_folder(tmp_path):
    path = tmp_path / "photo.png"
    path.write_bytes(image_files.png(seed=1))
    source = SourceFile("photo.png", str(path), None)

    outcome, accepted = inspection.examine_source(source, ImageLimits())

    assert outcome.status == inspection.ACCEPTED and accepted.encoded == path.read_bytes()
    assert inspection.inspect_source(source, ImageLimits()).reason == Reason.NO_LABEL
    (tmp_path / "notes.txt").write_text("not an image")
    ignored = SourceFile("notes.txt", str(tmp_path / "notes.txt"), None)
    assert inspection.examine_source(ignored, ImageLimits())[0].status == inspection.IGNORED
    assert inspection.examine_source(ignored, ImageLimits())[1] is None


def test_a_manifest_entry_naming_a_pipe_is_rejected_without_blocking(tmp_path):
    os.mkfifo(tmp_path / "pipe.jpg")
    source = SourceFile("pipe.jpg", str(tmp_path / "pipe.jpg"), "cat")
    outcome = inspection.inspect_source(source, inspection.ImageLimits())
    assert (outcome.status, outcome.reason) == (inspection.REJECTED, "unreadable")
    assert outcome.detail == "a named pipe, not a regular file"
