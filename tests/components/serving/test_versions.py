"""The served version of a serving folder is its highest whole one: never a push's hidden
temporary folder, a half-copied version or a file named like a number."""

from components.serving.versions import (
    PIN_FILE,
    PIN_HEADER,
    pinned_version,
    served_version,
    whole_versions,
)


def _version(base, name: str, whole: bool = True) -> None:
    folder = base / name
    (folder / "variables").mkdir(parents=True)
    (folder / "saved_model.pb").write_bytes(b"graph")
    if whole:
        (folder / "variables" / "variables.index").write_bytes(b"index")


def test_the_highest_whole_version_is_served(tmp_path):
    assert served_version(tmp_path / "missing") is None
    _version(tmp_path, "1700000000")
    _version(tmp_path, "1800000000")
    _version(tmp_path, "1900000000", whole=False)  # a copy cut short
    _version(tmp_path, ".pushing-abc")
    (tmp_path / "2000000000").write_bytes(b"a file, not a version")
    assert whole_versions(tmp_path) == [1800000000, 1700000000]
    assert served_version(tmp_path) == 1800000000


def test_a_pinned_whole_version_is_served_and_a_foreign_pin_is_not(tmp_path):
    _version(tmp_path, "1700000000")
    _version(tmp_path, "1800000000")
    pin = tmp_path / PIN_FILE
    pin.write_text(f"{PIN_HEADER}\n1700000000\n")
    assert pinned_version(tmp_path) == 1700000000
    assert served_version(tmp_path) == 1700000000
    pin.write_text(f"{PIN_HEADER}\n1900000000\n")  # pinned, then removed: not whole
    assert served_version(tmp_path) == 1800000000
    pin.write_text("1700000000\n")  # not a file imgpipe wrote
    assert pinned_version(tmp_path) is None
    assert served_version(tmp_path) == 1800000000
    pin.unlink()
    outside = tmp_path.parent / f"{tmp_path.name}-pin"
    outside.write_text(f"{PIN_HEADER}\n1700000000\n")
    pin.symlink_to(outside)  # a link is never read as a pin
    assert served_version(tmp_path) == 1800000000
