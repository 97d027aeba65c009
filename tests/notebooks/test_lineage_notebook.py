"""notebooks/lineage.ipynb executes top to bottom on tiny data (nbclient, the venv's ipykernel)
and shows what it promises: two runs, a lineage picture and the changed setting."""

import pathlib
import re

import nbformat
import pytest
from nbclient import NotebookClient

REPO = pathlib.Path(__file__).resolve().parents[2]
NOTEBOOK = REPO / "notebooks" / "lineage.ipynb"


def _outputs(notebook, kind: str) -> list:
    return [
        output
        for cell in notebook.cells
        if cell.cell_type == "code"
        for output in cell.outputs
        if output.get("output_type") == kind
    ]


@pytest.mark.slow
def test_lineage_notebook_executes_and_shows_runs_graph_and_diff(tmp_path, monkeypatch):
    monkeypatch.setenv("IMGPIPE_NOTEBOOK_DIR", str(tmp_path))
    monkeypatch.setenv("PYTHONPATH", str(REPO))  # this checkout, not an installed copy
    notebook = nbformat.read(NOTEBOOK, as_version=4)
    NotebookClient(
        notebook, timeout=900, kernel_name="python3", resources={"metadata": {"path": str(REPO)}}
    ).execute()
    text = "".join(output.get("text", "") for output in _outputs(notebook, "stream"))
    assert text.count("complete") >= 2  # two runs listed
    assert re.search(r"config +trainer\.learning_rate +0\.003 +0\.01", text)
    pictures = [
        output for output in _outputs(notebook, "display_data") if "image/png" in output["data"]
    ]
    assert len(pictures) == 1
    assert (tmp_path / "build" / "tfx" / "metadata.db").exists()
