"""The UI's view data and pages against the real two-run store (see conftest.py): what each page
shows is checked against the runs' own artifacts, and the CLI's `report` and `ui` commands."""

import json
import os
import re

import pytest

from components.evaluation.evaluation_report import REPORT_FILE
from pipeline import lineage
from pipeline.cli import main
from pipeline.ui import curves, report, views
from tests.pipeline.tiny_pipeline import SECOND_RATE
from tests.pipeline.two_run_store import DUPLICATE, EMPTY, IGNORED, TRUNCATED

pytestmark = pytest.mark.slow


def test_the_runs_view_lists_both_runs_newest_first(two_runs):
    rows = views.runs_view(two_runs.store)
    assert [row.run.run_id for row in rows] == [two_runs.second.run_id, two_runs.first.run_id]
    assert rows[1].states["ran"] == len(two_runs.first.components)
    assert rows[0].states.get("cached", 0) >= 1  # the unchanged ingest came from the cache


def test_the_run_view_shows_rejected_files_by_reason_with_thumbnails_where_they_decode(two_runs):
    view = views.run_view(two_runs.store, two_runs.first.run_id)
    rejected = {
        reason: {file.path: file for file in files}
        for reason, (_, files) in view.ingest.rejected_by_reason.items()
    }
    assert set(rejected) == {"duplicate", "empty", "truncated"}
    assert rejected["duplicate"][DUPLICATE].has_thumbnail
    assert not rejected["empty"][EMPTY].has_thumbnail
    assert not rejected["truncated"][TRUNCATED].has_thumbnail
    duplicate = rejected["duplicate"][DUPLICATE]
    assert view.images[("rejected", duplicate.index)][:2] == b"\xff\xd8"  # a JPEG
    assert view.ingest.ignored == (f"cat/{IGNORED}",)
    assert sum(view.ingest.per_class["cat"].values()) == 10


def test_the_run_view_gallery_is_the_evaluation_reports_mistakes_with_their_images(two_runs):
    view = views.run_view(two_runs.store, two_runs.first.run_id)
    evaluation_uri = lineage.run_artifacts(two_runs.store, view.run)["readable_evaluation"].uri
    with open(os.path.join(evaluation_uri, REPORT_FILE)) as handle:
        written = json.load(handle)
    mistakes = view.evaluation.mistakes
    assert mistakes, "the runlocal trainer learns nothing: some eval images must be wrong"
    assert [m.source_path for m in mistakes] == [r["source_path"] for r in written["misclassified"]]
    assert [m.predicted for m in mistakes] == [r["predicted"] for r in written["misclassified"]]
    assert all(m.has_image and ("mistake", m.index) in view.images for m in mistakes)
    # Each mistake's Grad-CAM overlay, from the report's gradcam/ folder, shown as a JPEG.
    assert all(
        m.has_gradcam and view.images[("gradcam", m.index)][:2] == b"\xff\xd8" for m in mistakes
    )
    counts = [count for row in view.evaluation.matrix for count, _ in row]
    assert sum(counts) == written["examples"]


def test_the_run_view_draws_the_trainers_scalars(two_runs):
    view = views.run_view(two_runs.store, two_runs.first.run_id)
    titles = [chart.title for chart in view.charts]
    assert titles == [title for title, _ in curves.CHARTS]
    loss = view.charts[0]
    assert "train/step_loss" in [series.tag for series in loss.series]
    assert view.run.eval_accuracy is not None and view.model_card is not None
    assert [bar.node for bar in view.timeline] == [c.node for c in two_runs.first.components]


def test_the_diff_view_shows_the_changed_learning_rate(two_runs):
    view = views.diff_view(two_runs.store, two_runs.first.run_id, two_runs.second.run_id)
    changes = {change.key: change for change in view.sections["config"]}
    assert changes["trainer.learning_rate"].b == SECOND_RATE


def test_the_lineage_view_links_every_model_dataset_and_execution(two_runs):
    view = views.lineage_view(two_runs.store, two_runs.first.model_id)
    labels = {node.label: node for node in view.picture.nodes}
    found = view.lineage
    assert labels[found.model.label].link == ("model_lineage", {"artifact_id": found.model.id})
    assert labels[found.dataset.examples.label].link[0] == "examples_lineage"
    assert labels[found.trainer.label].link == ("run", {"run_id": two_runs.first.run_id})
    assert labels[found.trainer.label].is_execution
    assert len(view.picture.edges) == len(found.edges)


def test_every_local_run_wrote_its_self_contained_report(two_runs):
    for run in (two_runs.first, two_runs.second):
        path = report.report_path(two_runs.config.pipeline_root, run.run_id)
        with open(path) as handle:
            page = handle.read()
        assert f"Run {run.run_id}" in page
        assert not re.search(r"""(src|href)=["']https?:""", page)  # nothing from the network
        assert 'src="data:image/jpeg;base64,' in page


def test_the_report_command_writes_the_page_and_names_unknown_runs(two_runs, tmp_path, capsys):
    output = tmp_path / "out" / "run.html"
    store = ["--mlmd-sqlite", two_runs.config.metadata_path]
    assert main(["report", "latest", "--output", str(output), *store]) == 0
    assert two_runs.second.run_id in capsys.readouterr().out
    assert f"Run {two_runs.second.run_id}" in output.read_text()
    assert main(["report", "nope", "--output", str(output), *store]) == 2
    assert capsys.readouterr().err.startswith("imgpipe report: error: no run 'nope'")
