"""notebooks/lineage.ipynb executes top to bottom on tiny data and shows what it promises: two
runs, a lineage picture and the changed setting. Its execution is what makes the session's
two-run store (tests/pipeline/two_run_store.py), on that store's images."""

import re

import pytest


def _outputs(notebook, kind: str) -> list:
    return [
        output
        for cell in notebook.cells
        if cell.cell_type == "code"
        for output in cell.outputs
        if output.get("output_type") == kind
    ]


@pytest.mark.slow
def test_lineage_notebook_executes_and_shows_runs_graph_and_diff(two_runs):
    notebook = two_runs.notebook
    text = "".join(output.get("text", "") for output in _outputs(notebook, "stream"))
    assert text.count("complete") >= 2  # two runs listed
    assert re.search(r"config +trainer\.learning_rate +0\.003 +0\.01", text)
    pictures = [
        output for output in _outputs(notebook, "display_data") if "image/png" in output["data"]
    ]
    assert len(pictures) == 1
    assert {two_runs.first.run_id, two_runs.second.run_id} <= set(re.findall(r"\S+", text))
