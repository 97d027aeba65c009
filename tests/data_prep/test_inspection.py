"""read_source: the whole file up to the limit, whatever the chunk size, and never more."""

from data_prep import inspection
from data_prep.sources import SourceFile


def _source(tmp_path, size: int) -> SourceFile:
    path = tmp_path / "file.bin"
    path.write_bytes(bytes(range(256)) * (size // 256) + bytes(size % 256))
    return SourceFile("file.bin", str(path), None)


def test_reads_a_file_larger_than_one_chunk_whole(tmp_path, monkeypatch):
    monkeypatch.setattr(inspection, "_READ_CHUNK_BYTES", 1000)
    source = _source(tmp_path, 4321)
    assert inspection.read_source(source, 10_000) == (tmp_path / "file.bin").read_bytes()


def test_reads_at_most_the_limit(tmp_path, monkeypatch):
    monkeypatch.setattr(inspection, "_READ_CHUNK_BYTES", 1000)
    source = _source(tmp_path, 4321)
    for limit in (1, 999, 1000, 2500, 4320):
        assert inspection.read_source(source, limit) == (tmp_path / "file.bin").read_bytes()[:limit]


def test_an_empty_file_reads_as_no_bytes(tmp_path):
    assert inspection.read_source(_source(tmp_path, 0), 100) == b""
