"""notebooks/lineage.ipynb executes top to bottom on tiny data and shows what it promises: two
runs, a lineage picture and the changed setting."""

import os
import re

import pytest

from tests.pipeline.tiny_pipeline import CHECKOUT, write_images

NOTEBOOK = CHECKOUT / "notebooks" / "lineage.ipynb"


def _outputs(notebook, kind: str) -> list:
    return [
        output
        for cell in notebook.cells
        if cell.cell_type == "code"
        for output in cell.outputs
        if output.get("output_type") == kind
    ]


@pytest.mark.slow
def test_lineage_notebook_executes_and_shows_runs_graph_and_diff(tmp_path):
    """Executed as CI executes it (nbclient, the venv's ipykernel), on tiny images, writing its
    store under its own folder."""
    import nbformat
    from nbclient import NotebookClient

    from pipeline.lineage import list_runs
    from pipeline.runners.local import open_store

    images = write_images(tmp_path / "images")
    notebook = nbformat.read(NOTEBOOK, as_version=4)
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("IMGPIPE_NOTEBOOK_DIR", str(tmp_path))
        patch.setenv("IMGPIPE_NOTEBOOK_IMAGES", str(images))
        patch.setenv("PYTHONPATH", str(CHECKOUT))  # this checkout, not an installed copy
        NotebookClient(
            notebook,
            timeout=900,
            kernel_name="python3",
            resources={"metadata": {"path": str(tmp_path)}},
        ).execute()
    text = "".join(output.get("text", "") for output in _outputs(notebook, "stream"))
    assert text.count("complete") >= 2  # two runs listed
    assert re.search(r"config +trainer\.learning_rate +0\.003 +0\.01", text)
    pictures = [
        output for output in _outputs(notebook, "display_data") if "image/png" in output["data"]
    ]
    assert len(pictures) == 1
    store = open_store(os.path.join(tmp_path, "build", "tfx", "metadata.db"))
    runs = list_runs(store)
    assert len(runs) == 2
    assert {run.run_id for run in runs} <= set(re.findall(r"\S+", text))
