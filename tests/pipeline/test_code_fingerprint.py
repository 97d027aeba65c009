import types

from pipeline import code_fingerprint as module


def test_any_source_edit_changes_the_fingerprint(tmp_path, monkeypatch):
    package = tmp_path / "pkg"
    (package / "sub").mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "sub" / "deep.py").write_text("X = 1\n")
    fake = types.SimpleNamespace(__file__=str(package / "__init__.py"))
    monkeypatch.setattr(module, "PACKAGES", (fake,))
    first = module.code_fingerprint()
    assert module.code_fingerprint() == first
    (package / "sub" / "deep.py").write_text("X = 2\n")
    assert module.code_fingerprint() != first


def test_real_fingerprint_covers_this_project():
    assert len(module.code_fingerprint()) == 64
