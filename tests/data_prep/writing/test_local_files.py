"""A file replaced atomically is whole or as it was, even when the disk fills; a link at the
target is replaced, never written through; an exclusive file never overwrites."""

import os
import resource
import signal
import subprocess
import sys

import pytest

from data_prep.writing import local_files


def test_a_write_cut_short_by_a_full_disk_leaves_the_target_as_it_was(tmp_path):
    target = tmp_path / "model_float32.tflite"
    target.write_bytes(b"old")

    def small_disk():  # writes past 64 KiB fail with EFBIG, as on a full disk
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (1 << 16, 1 << 16))

    code = (
        "import sys; from data_prep.writing.local_files import write_atomically; "
        "write_atomically(sys.argv[1], b'x' * (1 << 20))"
    )
    result = subprocess.run(
        [sys.executable, "-c", code, str(target)],
        preexec_fn=small_disk,
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode != 0 and "File too large" in result.stderr
    assert target.read_bytes() == b"old" and os.listdir(tmp_path) == [target.name]


def test_a_link_at_the_target_is_replaced_not_written_through(tmp_path):
    victim = tmp_path / "victim"
    victim.write_bytes(b"theirs")
    os.symlink(victim, tmp_path / "out")
    local_files.write_atomically(str(tmp_path / "out"), b"ours")
    assert victim.read_bytes() == b"theirs"
    assert not os.path.islink(tmp_path / "out") and (tmp_path / "out").read_bytes() == b"ours"


def test_an_exclusive_file_refuses_a_file_or_a_link_there(tmp_path):
    victim = tmp_path / "victim"
    victim.write_bytes(b"theirs")
    os.symlink(victim, tmp_path / "link")
    for path in (victim, tmp_path / "link"):
        with pytest.raises(FileExistsError):
            local_files.create_exclusively(str(path))
    assert victim.read_bytes() == b"theirs"
    with local_files.create_exclusively(str(tmp_path / "new")) as handle:
        handle.write(b"ours")
    assert (tmp_path / "new").read_bytes() == b"ours"
