"""The serving root: one lock for every store that pushes there; only real folders right inside
it are removed or moved aside, never through a link."""

import os
import subprocess
import sys
import threading

import pytest

from components.serving import serving_root
from components.serving.versions import PIN_FILE, pinned_version


def test_a_second_store_waits_for_the_lock_of_the_first(tmp_path):
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys; from components.serving.serving_root import locked\n"
            "with locked(sys.argv[1]):\n    print('held', flush=True); sys.stdin.readline()",
            str(tmp_path),
        ],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert holder.stdout.readline().strip() == "held"
    entered = threading.Event()

    def take():
        with serving_root.locked(str(tmp_path)):
            entered.set()

    thread = threading.Thread(target=take)
    thread.start()
    assert not entered.wait(1.0)  # the other process holds it
    holder.communicate("\n")
    thread.join(30)
    assert entered.is_set()


def test_links_and_entries_outside_the_root_are_never_removed_or_moved(tmp_path):
    root = tmp_path / "root"
    target = tmp_path / "target"
    (target / "inside").mkdir(parents=True)
    root.mkdir()
    os.symlink(target, root / "5")
    assert serving_root.remove_staged(str(root / "5"), str(root)) is False
    assert serving_root.move_aside(str(root / "5"), str(root)) is None
    with pytest.raises(ValueError, match="is not an entry of"):
        serving_root.remove_staged(str(target / "inside"), str(root))
    assert (target / "inside").is_dir() and os.path.islink(root / "5")
    (root / "6").mkdir()
    (root / "6.broken").mkdir()
    assert serving_root.move_aside(str(root / "6"), str(root)) == str(root / "6.broken.2")


def test_the_pin_is_written_whole_and_never_through_a_link(tmp_path):
    serving_root.pin(tmp_path, 1700000000)
    assert pinned_version(tmp_path) == 1700000000
    serving_root.pin(tmp_path, 1800000000)  # its own pin is replaced
    assert pinned_version(tmp_path) == 1800000000
    assert sorted(os.listdir(tmp_path)) == [PIN_FILE]  # no temporary file left
    assert serving_root.unpin(tmp_path) is True
    assert serving_root.unpin(tmp_path) is False
    target = tmp_path.parent / f"{tmp_path.name}-target"
    target.write_text("someone else's file")
    (tmp_path / PIN_FILE).symlink_to(target)
    with pytest.raises(serving_root.NotOurs):
        serving_root.pin(tmp_path, 1700000000)
    with pytest.raises(serving_root.NotOurs):
        serving_root.unpin(tmp_path)
    assert target.read_text() == "someone else's file"
    assert os.path.islink(tmp_path / PIN_FILE)


def test_a_file_imgpipe_did_not_write_under_the_pins_name_stays(tmp_path):
    (tmp_path / PIN_FILE).write_text("another tool's notes")
    with pytest.raises(serving_root.NotOurs):
        serving_root.pin(tmp_path, 1700000000)
    with pytest.raises(serving_root.NotOurs):
        serving_root.unpin(tmp_path)
    assert (tmp_path / PIN_FILE).read_text() == "another tool's notes"
