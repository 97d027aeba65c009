"""The lineage queries are the lowest stage of pipeline/: the other stages read the store through
them, so they import none of those stages, only the modules at pipeline/'s root."""

import ast
import pathlib

LINEAGE = pathlib.Path(__file__).resolve().parents[3] / "pipeline" / "lineage"
STAGES = ("cli", "config", "runners", "serving", "training", "ui", "validation")


def imported(source: pathlib.Path) -> set[str]:
    names = set()
    for node in ast.walk(ast.parse(source.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module)
        elif isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
    return names


def test_lineage_imports_no_other_stage_of_the_pipeline():
    upward = sorted(
        f"{source.name}: {name}"
        for source in LINEAGE.glob("*.py")
        for name in imported(source)
        if name.split(".")[:2] in (["pipeline", stage] for stage in STAGES)
    )
    assert upward == []
