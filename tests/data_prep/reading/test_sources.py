import json
import pathlib

import pytest

from data_prep.reading.sources import SourceError, SourceFile, list_sources, read_manifest


def _touch(path, data=b"x"):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)


def test_class_folders_label_every_depth_and_leave_root_files_unlabelled(tmp_path):
    for relative in ("cat/a.jpg", "cat/deep/er/b.png", "dog/c.jpg", "README.md", "dog/.DS_Store"):
        _touch(tmp_path / relative)
    sources = list_sources(str(tmp_path))
    assert [(s.relative_path, s.label) for s in sources] == [
        ("README.md", None),
        ("cat/a.jpg", "cat"),
        ("cat/deep/er/b.png", "cat"),
        ("dog/.DS_Store", "dog"),
        ("dog/c.jpg", "dog"),
    ]
    assert all(s.path.startswith(str(tmp_path)) for s in sources)


@pytest.mark.parametrize("spelling", ["{root}/", "{root}//", "{root}/./", "{relative}"])
def test_any_spelling_of_the_root_gives_the_same_relative_paths(tmp_path, monkeypatch, spelling):
    for relative in ("cat/a.jpg", "cat/deep/b.png", "top.jpg"):
        _touch(tmp_path / "in" / relative)
    monkeypatch.chdir(tmp_path)
    root = spelling.format(root=tmp_path / "in", relative="./in")
    assert [s.relative_path for s in list_sources(root)] == [
        "cat/a.jpg",
        "cat/deep/b.png",
        "top.jpg",
    ]


def test_missing_or_empty_input_is_a_clear_error(tmp_path):
    with pytest.raises(SourceError, match="empty or does not exist"):
        list_sources(str(tmp_path / "nowhere"))


def test_csv_manifest_resolves_relative_paths_and_keeps_splits(tmp_path):
    (tmp_path / "m.csv").write_text("path,label,split\nimg/1.jpg,cat,eval\n/abs/2.jpg,dog,\n")
    sources = list_sources(str(tmp_path / "m.csv"))
    assert sources == [
        SourceFile("/abs/2.jpg", "/abs/2.jpg", "dog", None),
        SourceFile("img/1.jpg", str(tmp_path / "img/1.jpg"), "cat", "eval"),
    ]


def test_jsonl_manifest(tmp_path):
    rows = [{"path": "a.jpg", "label": "cat"}, {"path": "b.jpg", "label": "dog", "split": "test"}]
    (tmp_path / "m.jsonl").write_text("\n".join(json.dumps(r) for r in rows) + "\n\n")
    sources = list_sources(str(tmp_path / "m.jsonl"))
    assert [(s.relative_path, s.label, s.split) for s in sources] == [
        ("a.jpg", "cat", None),
        ("b.jpg", "dog", "test"),
    ]


def test_val_and_validation_name_the_eval_split(tmp_path):
    (tmp_path / "m.csv").write_text("path,label,split\na.jpg,cat,val\nb.jpg,dog,validation\n")
    assert [s.split for s in list_sources(str(tmp_path / "m.csv"))] == ["eval", "eval"]


def test_every_problem_of_a_manifest_is_reported_at_once(tmp_path):
    rows = ["a.jpg,cat", "a.jpg,dog", "b.jpg,cat,valid", ",cat"]
    rows += [f"x{index}.jpg," for index in range(20)]  # 23 problems in all
    (tmp_path / "m.csv").write_text("path,label,split\n" + "\n".join(rows) + "\n")
    with pytest.raises(SourceError) as raised:
        list_sources(str(tmp_path / "m.csv"))
    lines = [line.strip() for line in str(raised.value).splitlines()]
    manifest = str(tmp_path / "m.csv")
    assert lines[0] == f"manifest {manifest!r} has 23 problems:"
    assert lines[1:5] == [
        f"{manifest}:3: 'a.jpg' is listed twice",
        f"{manifest}:4: split 'valid' is not one of train, eval, test, val, validation",
        f"{manifest}:5: missing 'path'",
        f"{manifest}:6: missing 'label' for 'x0.jpg'",
    ]
    assert len(lines) == 1 + 20 + 1 and lines[-1] == "... and 3 more"


@pytest.mark.parametrize(
    ("name", "text", "message"),
    [
        ("m.csv", "file,class\na.jpg,cat\n", "must name 'path' and 'label'"),
        ("m.csv", "path,label\na.jpg,\n", r"m.csv:2: missing 'label'"),
        ("m.csv", "path,label,split\na.jpg,cat,valid\n", "split 'valid' is not one of"),
        ("m.csv", "path,label\na.jpg,cat\na.jpg,dog\n", "listed twice"),
        ("m.jsonl", '{"path": "a.jpg", "label": "cat"}\n{oops\n', r"m.jsonl:2: not valid JSON"),
        ("m.csv", "path,label\n", "lists no files"),
    ],
)
def test_bad_manifests_fail_naming_the_line(tmp_path, name, text, message):
    (tmp_path / name).write_text(text)
    with pytest.raises(SourceError, match=message):
        list_sources(str(tmp_path / name))


def test_image_extension_is_case_insensitive():
    assert SourceFile("a/B.JPEG", "x", "a").has_image_extension
    assert not SourceFile("a/notes.txt", "x", "a").has_image_extension


def test_input_fingerprint_changes_when_any_image_changes(tmp_path):
    from data_prep.reading.sources import input_fingerprint

    _touch(tmp_path / "cat/a.jpg", b"one")
    _touch(tmp_path / "dog/b.jpg", b"two")
    first = input_fingerprint(str(tmp_path))
    assert input_fingerprint(str(tmp_path)) == first
    (tmp_path / "dog/b.jpg").write_bytes(b"changed")
    second = input_fingerprint(str(tmp_path))
    assert second != first
    _touch(tmp_path / "dog/c.jpg")
    assert input_fingerprint(str(tmp_path)) not in (first, second)


def test_links_loops_and_odd_entries_are_listed_with_their_problem(tmp_path):
    import os

    from data_prep.reading.image_validation import Reason

    _touch(tmp_path / "cat/a.jpg")
    _touch(tmp_path / "elsewhere/b.jpg")
    os.symlink("a.jpg", tmp_path / "cat/link_to_file.jpg")
    os.symlink("../elsewhere", tmp_path / "cat/linked_folder")
    os.symlink(".", tmp_path / "cat/loop")
    os.symlink("self", tmp_path / "cat/self")
    os.symlink("gone.jpg", tmp_path / "cat/dangling.jpg")
    os.mkfifo(tmp_path / "cat/pipe")
    problems = {s.relative_path: s.problem for s in list_sources(str(tmp_path))}
    assert problems == {
        "cat/a.jpg": None,
        "cat/dangling.jpg": Reason.BROKEN_LINK,
        "cat/link_to_file.jpg": None,
        "cat/linked_folder/b.jpg": None,
        "cat/loop": Reason.SYMLINK_LOOP,
        "cat/pipe": Reason.UNREADABLE,  # never opened: reading a pipe could block forever
        "cat/self": Reason.SYMLINK_LOOP,
        "elsewhere/b.jpg": None,
    }


def test_a_file_name_that_is_not_utf8_is_listed_with_escapes_and_fingerprinted(tmp_path):
    import os

    from data_prep.reading.sources import input_fingerprint

    name = os.fsdecode(b"bad\xff\xfe0.jpg")
    _touch(tmp_path / "cat" / name, b"bytes")
    (source,) = list_sources(str(tmp_path))
    assert source.relative_path == "cat/bad\\xff\\xfe0.jpg"
    assert pathlib.Path(source.path).read_bytes() == b"bytes"  # the path still opens the file
    before = input_fingerprint(str(tmp_path))
    (tmp_path / "cat" / name).write_bytes(b"other bytes")
    assert input_fingerprint(str(tmp_path)) != before


def test_a_manifest_of_images_to_classify_may_leave_labels_out(tmp_path):
    manifest = tmp_path / "new.csv"
    manifest.write_text("path\nphotos/a.jpg\n")

    [source] = read_manifest(str(manifest), labelled=False)

    assert source.label is None and source.path == str(tmp_path / "photos" / "a.jpg")
    with pytest.raises(SourceError, match="'path' and 'label' columns"):
        read_manifest(str(manifest))


def test_a_manifest_that_is_a_pipe_is_refused_without_blocking(tmp_path):
    import os

    os.mkfifo(tmp_path / "list.csv")
    with pytest.raises(SourceError, match="a named pipe, not a regular file"):
        list_sources(str(tmp_path / "list.csv"))
