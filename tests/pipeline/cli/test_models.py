"""`imgpipe models list` and `imgpipe models rollback` on a build folder's serving folder with
two versions: the served one is marked, a rollback switches it and --latest undoes it, a
version that is not whole exits 2 with one line."""

from components.serving.versions import PIN_FILE, served_version
from pipeline.cli import main
from tests.components.serving.test_versions import _version

OLD, NEW = 1700000000, 1800000000


def _build(tmp_path):
    build = tmp_path / "build"
    base = build / "serving" / "imgpipe"
    _version(base, str(OLD))
    _version(base, str(NEW))
    return str(build), base


def test_list_marks_the_served_version_and_rollback_switches_it(tmp_path, capsys):
    build, base = _build(tmp_path)
    assert main(["models", "list", "--build-dir", build]) == 0
    listed = capsys.readouterr().out.splitlines()
    assert listed[1].startswith(f"* {NEW}") and "serving" in listed[1]
    assert listed[2].startswith(f"  {OLD}") and "kept" in listed[2]
    assert main(["models", "rollback", str(OLD), "--build-dir", build]) == 0
    assert f"version {OLD} of {base} serves now (pinned)" in capsys.readouterr().out
    assert served_version(base) == OLD
    assert main(["models", "list", "--build-dir", build]) == 0
    assert f"* {OLD}" in capsys.readouterr().out
    assert main(["models", "rollback", "--latest", "--build-dir", build]) == 0
    assert f"version {NEW} of {base} serves now" in capsys.readouterr().out
    assert not (base / PIN_FILE).exists()


def test_rollback_to_a_version_that_is_not_whole_exits_2_with_one_line(tmp_path, capsys):
    build, base = _build(tmp_path)
    _version(base, "1900000000", whole=False)
    assert main(["models", "rollback", "1900000000", "--build-dir", build]) == 2
    err = capsys.readouterr().err
    assert err.startswith("imgpipe models rollback: error: version 1900000000 is not a whole")
    assert len(err.splitlines()) == 1
    assert main(["models", "rollback", "1600000000", "--build-dir", build]) == 2
    assert not (base / PIN_FILE).exists()
