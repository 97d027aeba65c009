"""Each component carries the fingerprint of its own code: what it imports from our packages,
read from the source; an edit changes the compiled settings of exactly the components that run
the edited code."""

import pathlib
import shutil

from tfx.dsl.compiler import compiler

from pipeline import code_fingerprint as module
from pipeline.code_fingerprint import PROJECT_ROOT, code_fingerprint, source_files
from pipeline.config.pipeline_config import local_preset
from pipeline.factory import create_pipeline
from pipeline.validation.data_snapshot import DataSnapshot


def _write(root: pathlib.Path, files: dict[str, str]) -> None:
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)


def test_a_module_s_code_is_what_it_imports_from_our_packages_transitively(tmp_path):
    _write(
        tmp_path,
        {
            "components/__init__.py": "import data_prep\n",
            "components/card.py": "from components import report\nimport numpy\n",
            "components/report.py": "def read():\n    from components.sub.deep import X\n",
            "components/sub/__init__.py": "",
            "components/sub/deep.py": "from . import near\nfrom ..other import Y\n",
            "components/sub/near.py": "",
            "components/other.py": "Y = 1\n",
            "components/unrelated.py": "",
            "data_prep/__init__.py": "",
        },
    )
    found = {p.relative_to(tmp_path).as_posix() for p in source_files("components.card", tmp_path)}
    assert found == {
        "components/__init__.py",
        "components/card.py",
        "components/report.py",  # `from components import report`: a module, not a name
        "components/sub/__init__.py",
        "components/sub/deep.py",  # imported inside a function
        "components/sub/near.py",  # relative imports
        "components/other.py",
        "data_prep/__init__.py",  # through the package's __init__
    }


def test_an_edit_changes_the_fingerprint_of_the_modules_that_import_it_only(tmp_path):
    _write(
        tmp_path,
        {
            "components/__init__.py": "",
            "components/a.py": "from components import shared\n",
            "components/b.py": "",
            "components/shared.py": "X = 1\n",
        },
    )
    before = {name: code_fingerprint(f"components.{name}", tmp_path) for name in "ab"}
    assert code_fingerprint("components.a", tmp_path) == before["a"]  # deterministic
    (tmp_path / "components" / "shared.py").write_text("X = 2\n")
    after = {name: code_fingerprint(f"components.{name}", tmp_path) for name in "ab"}
    assert after["a"] != before["a"] and after["b"] == before["b"]


def test_the_serving_check_s_code_includes_the_probe_it_runs():
    files = source_files("components.serving.serving_check")
    assert PROJECT_ROOT / "components" / "serving" / "serving_probe.py" in files


def test_the_same_tree_elsewhere_has_the_same_fingerprint(tmp_path):
    """Paths are hashed relative to the project root: a checkout's location is not code."""
    for package in module.OWN_PACKAGES:
        shutil.copytree(PROJECT_ROOT / package, tmp_path / package)
    name = "components.serving.model_card"
    assert code_fingerprint(name, tmp_path) == code_fingerprint(name)


def _compiled_parameters(root: pathlib.Path, tmp_path: pathlib.Path) -> dict[str, bytes]:
    """Node id -> its compiled parameters (what TFX's cache key hashes beside the node, executor
    class path and inputs), for the pipeline built with the code under root."""
    config = local_preset(str(tmp_path / "images"), str(tmp_path / "build"))
    pipeline = create_pipeline(
        config, DataSnapshot("abc", 1), lambda name: code_fingerprint(name, root), None
    )
    return {
        node.pipeline_node.node_info.id: node.pipeline_node.parameters.SerializeToString(
            deterministic=True
        )
        for node in compiler.Compiler().compile(pipeline).nodes
    }


def _nodes_whose_settings_an_edit_changes(tmp_path, edited: str) -> set[str]:
    copy = tmp_path / "copy"
    for package in module.OWN_PACKAGES:
        shutil.copytree(PROJECT_ROOT / package, copy / package)
    before = _compiled_parameters(copy, tmp_path)
    with open(copy / edited, "a") as handle:
        handle.write("\n# an edit\n")
    after = _compiled_parameters(copy, tmp_path)
    assert set(before) == set(after)
    return {node for node in before if before[node] != after[node]}


def test_editing_ingest_code_re_runs_the_ingest(tmp_path):
    """New Examples then re-run everything downstream (their inputs changed: TFX's cache key holds
    the input artifacts; tests/e2e/test_local_run.py's changed-images run shows it). ModelCardGen
    imports the ingest's module to read its report, so its settings change too; no component that
    runs none of the ingest's code changes (the DataGate reads the report through
    data_prep/writing/ingest_outputs.py)."""
    changed = _nodes_whose_settings_an_edit_changes(tmp_path, "data_prep/reading/inspection.py")
    assert {"ImageExampleGen", "ModelCardGen"} <= changed
    untouched = {"DataGate", "CuratedSchemaGen", "Transform", "Trainer", "ServingCheck"}
    untouched |= {"TFLiteExport", "EvaluationReportGen"}
    assert not changed & untouched


def test_editing_the_model_card_re_writes_cards_only(tmp_path):
    changed = _nodes_whose_settings_an_edit_changes(tmp_path, "components/serving/model_card.py")
    assert changed == {"ModelCardGen"}


def test_editing_the_training_loop_re_trains_only(tmp_path):
    changed = _nodes_whose_settings_an_edit_changes(tmp_path, "components/training/train.py")
    assert changed == {"Trainer"}
