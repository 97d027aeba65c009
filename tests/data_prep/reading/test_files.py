"""read_file: regular files only, never more than the limit read, nothing that can block."""

import os
import socket

import pytest

from data_prep.reading import files


def test_reads_a_regular_file_whole(tmp_path):
    (tmp_path / "a.bin").write_bytes(b"x" * 5000)
    assert files.read_file(str(tmp_path / "a.bin"), 5000) == b"x" * 5000


def test_a_file_over_the_limit_is_refused_by_its_size(tmp_path):
    (tmp_path / "big.jpg").write_bytes(b"x" * 5001)
    with pytest.raises(files.FileTooLargeError, match="5001 bytes, more than the 5000"):
        files.read_file(str(tmp_path / "big.jpg"), 5000)


def test_a_file_that_grew_past_the_limit_is_refused_after_limit_plus_one_bytes(
    tmp_path, monkeypatch
):
    (tmp_path / "grows.bin").write_bytes(b"x" * 4000)
    real_fstat = os.fstat
    reads = []

    def stale_fstat(fd):
        status = real_fstat(fd)
        return os.stat_result((*status[:6], 10, *status[7:]))  # st_size says 10

    monkeypatch.setattr(os, "fstat", stale_fstat)
    monkeypatch.setattr(files, "_READ_CHUNK_BYTES", 100)
    original_read_upto = files.read_upto

    def counted(handle, limit):
        data = original_read_upto(handle, limit)
        reads.append(len(data))
        return data

    monkeypatch.setattr(files, "read_upto", counted)
    with pytest.raises(files.FileTooLargeError, match="grew beyond the 1000 bytes"):
        files.read_file(str(tmp_path / "grows.bin"), 1000)
    assert reads == [1001 - 11]  # after the first read of st_size + 1 bytes: limit + 1 in all


@pytest.mark.parametrize("make", ["fifo", "folder", "socket", "dev_zero", "dev_null"])
def test_anything_but_a_regular_file_is_refused_without_blocking(tmp_path, make):
    path = str(tmp_path / "entry.jpg")
    if make == "fifo":
        os.mkfifo(path)  # opening it for reading would wait for a writer for ever
        kind = "a named pipe"
    elif make == "folder":
        os.mkdir(path)
        kind = "a folder"
    elif make == "socket":
        server = socket.socket(socket.AF_UNIX)
        server.bind(path)
        kind = None  # a socket cannot be opened at all: the OSError of opening it
    else:
        path = "/dev/zero" if make == "dev_zero" else "/dev/null"
        kind = "a character device"
    with pytest.raises(OSError) as raised:
        files.read_file(path, 1000)
    if kind is not None:
        assert isinstance(raised.value, files.NotRegularFileError)
        assert str(raised.value) == f"{kind}, not a regular file"
        assert raised.value.path == path


def test_a_link_is_followed_unless_asked_not_to(tmp_path):
    (tmp_path / "target.bin").write_bytes(b"data")
    os.symlink("target.bin", tmp_path / "link.bin")
    assert files.read_file(str(tmp_path / "link.bin"), 10) == b"data"
    with pytest.raises(OSError):
        files.read_file(str(tmp_path / "link.bin"), 10, follow_symlinks=False)


def test_errors_survive_pickling_with_their_path():
    import pickle

    error = pickle.loads(pickle.dumps(files.FileTooLargeError("/x.jpg", "too big")))
    assert (type(error), error.path, str(error)) == (files.FileTooLargeError, "/x.jpg", "too big")


def test_a_missing_or_empty_local_input_is_said_before_any_listing(tmp_path):
    from data_prep.reading.files import local_input_problem

    (tmp_path / "empty").mkdir()
    (tmp_path / "cats" / "a").mkdir(parents=True)
    (tmp_path / "manifest.csv").write_text("path,label\n")
    assert local_input_problem(str(tmp_path / "missing")) == (
        f"input {str(tmp_path / 'missing')!r} is empty or does not exist"
    )
    assert local_input_problem(str(tmp_path / "empty") + "/") == (
        f"input {str(tmp_path / 'empty')!r} is empty or does not exist"
    )
    assert local_input_problem(str(tmp_path / "cats")) is None  # the listing says the rest
    assert local_input_problem(str(tmp_path / "manifest.csv")) is None
    assert local_input_problem("gs://bucket/images") is None
