"""The model pages and the run comparison: the rendered card escapes HTML; the pushed versions,
their gate decisions and files come from the two-run store (tests/pipeline/two_run_store.py); the
runs table sorts and filters on the server; the downloads are the version's own files."""

import io
import json
import os
import shutil
import tarfile

import pytest

from pipeline import lineage
from pipeline.mlmd_connection import MlmdTarget
from pipeline.ui import model_pages
from pipeline.ui.app import create_app
from tests.pipeline.tiny_pipeline import SECOND_RATE


def test_the_card_renders_tables_and_shows_html_as_text():
    html = model_pages.render_markdown(
        "# Card\n\n| a | b |\n|---|---|\n| 1 | <script>alert(1)</script> |\n\n"
        "[x](javascript:alert(1)) <img src=x onerror=alert(1)>"
    )
    assert "<h1>Card</h1>" in html and "<td>1</td>" in html
    assert "<script>" not in html and "&lt;script&gt;" in html
    assert "<img" not in html and 'href="javascript' not in html
    assert model_pages.render_markdown(None) == ""


def test_the_saved_model_archive_holds_the_saved_model_and_nothing_placed_beside_it(tmp_path):
    version = tmp_path / "17"
    (version / "variables").mkdir(parents=True)
    (version / "saved_model.pb").write_bytes(b"graph")
    (version / "variables" / "variables.index").write_bytes(b"index")
    (version / "tflite").mkdir()
    (version / "tflite" / "model_int8.tflite").write_bytes(b"tflite")
    (version / "model_card.md").write_text("# card")
    buffer = io.BytesIO()

    model_pages.saved_model_archive(str(version), buffer)

    with tarfile.open(fileobj=io.BytesIO(buffer.getvalue()), mode="r:gz") as archive:
        names = sorted(archive.getnames())
        assert archive.extractfile("17/saved_model.pb").read() == b"graph"
    assert names == ["17/saved_model.pb", "17/variables", "17/variables/variables.index"]


def test_the_archive_and_the_downloads_hold_no_link_and_nothing_outside(tmp_path):
    secret = tmp_path / "secret"
    secret.write_text("not a model's")
    version = tmp_path / "serving" / "18"
    (version / "variables").mkdir(parents=True)
    (version / "saved_model.pb").write_bytes(b"graph")
    os.symlink(secret, version / "variables" / "variables.index")
    os.symlink(secret, version / "assets")
    os.symlink(secret, version / "model_card.md")
    (version / "evaluation").mkdir()
    (version / "evaluation" / "confusion.png").write_bytes(b"png")
    card = {"tflite": {"files": {"float32": "../../../secret", "int8": "model_int8.tflite"}}}
    buffer = io.BytesIO()

    model_pages.saved_model_archive(str(version), buffer)
    files = model_pages.downloadable_files(str(version), card, "evaluation/confusion.png")

    with tarfile.open(fileobj=io.BytesIO(buffer.getvalue()), mode="r:gz") as archive:
        assert sorted(archive.getnames()) == ["18/saved_model.pb", "18/variables"]
    assert files == {"evaluation/confusion.png": "evaluation/confusion.png"}
    os.symlink(version, tmp_path / "serving" / "19")
    assert model_pages.downloadable_files(str(tmp_path / "serving" / "19"), card, "x") == {}


def test_a_versions_state_says_what_became_of_its_folder(tmp_path):
    root = tmp_path / "serving"
    for version in ("1", "2", "3", "4"):
        (root / version / "variables").mkdir(parents=True)
        (root / version / "saved_model.pb").write_bytes(b"graph")
        (root / version / "variables" / "variables.index").write_bytes(b"index")
    os.rename(root / "3", root / "3.broken")
    shutil.rmtree(root / "4")
    os.symlink(root / "1", root / "4")
    states = {v: model_pages.folder_state(str(root / v)) for v in ("1", "2", "3", "4", "5")}
    assert states == {
        "1": "kept",
        "2": "kept",
        "3": "moved aside",
        "4": "replaced by a link",
        "5": "removed",
    }
    os.remove(root / "4")
    assert model_pages.folder_state(str(root / "2")) == "serving"


@pytest.fixture(scope="module")
def client(two_runs):
    target = MlmdTarget(sqlite=two_runs.config.metadata_path)
    return create_app(target.open, target.describe()).test_client()


@pytest.mark.slow
def test_the_models_view_lists_each_pushed_version_once_with_the_run_that_pushed_it(two_runs):
    runs = lineage.list_runs(two_runs.store)
    pushed = {run.pushed_model_id for run in runs if run.pushed_model_id is not None}

    versions = model_pages.models_view(two_runs.store)

    assert {version.pushed_model_id for version in versions} == pushed
    first = next(v for v in versions if v.model_id == two_runs.first.model_id)
    assert first.run.run_id == two_runs.first.run_id
    assert first.folder == two_runs.first.pushed_to
    assert first.version == os.path.basename(two_runs.first.pushed_to)


@pytest.mark.slow
def test_the_model_view_has_the_cards_figures_gates_and_files(two_runs):
    view = model_pages.model_view(two_runs.store, two_runs.first.model_id)

    with open(os.path.join(two_runs.first.pushed_to, "model_card.json")) as handle:
        card = json.load(handle)
    assert view.card == card
    assert "<table>" in view.card_html and "<h1>Model card" in view.card_html
    stages = [decision.stage for decision in view.decisions]
    assert stages[:3] == ["data gate", "Evaluator", "serving check"]
    assert view.decisions[1].outcome == "blessed"
    tflite = {f"tflite/{name}" for name in card["tflite"]["files"].values()}
    assert tflite <= set(view.files) and "tflite/model_float32.tflite" in tflite
    assert {"model_card.md", "model_card.json", "evaluation/confusion_matrix.png"} <= set(
        view.files
    )
    with pytest.raises(lineage.LineageError, match="no pushed version"):
        model_pages.model_view(two_runs.store, 10**6)


@pytest.mark.slow
def test_the_downloads_are_the_versions_files_and_nothing_else(client, two_runs):
    base = f"/models/{two_runs.first.model_id}"
    archive = client.get(f"{base}/saved_model.tar.gz")
    assert archive.status_code == 200
    with tarfile.open(fileobj=io.BytesIO(archive.data), mode="r:gz") as opened:
        version = os.path.basename(two_runs.first.pushed_to)
        assert f"{version}/saved_model.pb" in opened.getnames()
    float32 = client.get(f"{base}/files/tflite/model_float32.tflite")
    with open(os.path.join(two_runs.first.pushed_to, "tflite", "model_float32.tflite"), "rb") as f:
        assert float32.status_code == 200 and float32.data == f.read()
    assert client.get(f"{base}/files/saved_model.pb").status_code == 404  # not a listed file
    assert client.get(f"{base}/files/../../metadata.db").status_code == 404
    assert client.get("/models/999999").status_code == 404


@pytest.mark.slow
def test_the_runs_table_sorts_and_filters_on_the_server(two_runs):
    first, second = two_runs.first.run_id, two_runs.second.run_id

    by_id = model_pages.compare_view(two_runs.store, [], sort="run", descending=False)
    by_accuracy = model_pages.compare_view(two_runs.store, [], sort="accuracy", descending=True)
    filtered = model_pages.compare_view(two_runs.store, [], query=second[-6:])
    none_failed = model_pages.compare_view(two_runs.store, [], status="failed")

    assert [run.run_id for run in by_id.runs] == sorted([first, second])
    accuracies = [run.eval_accuracy for run in by_accuracy.runs]
    assert accuracies == sorted(accuracies, reverse=True)
    assert [run.run_id for run in filtered.runs] == [second]
    assert none_failed.runs == () and none_failed.total == 2
    with pytest.raises(lineage.LineageError, match="no column 'speed'"):
        model_pages.compare_view(two_runs.store, [], sort="speed")


@pytest.mark.slow
def test_the_runs_table_has_a_column_per_setting_that_differs_and_sorts_by_it(two_runs):
    first, second = two_runs.first.run_id, two_runs.second.run_id
    rate = "trainer.learning_rate"

    view = model_pages.compare_view(two_runs.store, [], sort="set:" + rate, descending=True)
    only_one = model_pages.compare_view(two_runs.store, [], query=second[-6:])

    assert view.settings == (rate,)  # the one setting the second run changed
    rates = [view.run_settings[run.run_id][rate] for run in view.runs]
    assert rates == sorted(rates, reverse=True) and SECOND_RATE in rates
    assert {run.run_id for run in view.runs} == {first, second}
    assert only_one.settings == ()  # one run: nothing differs
    with pytest.raises(lineage.LineageError, match="no column 'set:trainer.epochs'"):
        model_pages.compare_view(two_runs.store, [], sort="set:trainer.epochs")


@pytest.mark.slow
def test_the_compared_runs_curves_are_overlaid_one_series_per_run(two_runs):
    first, second = two_runs.first.run_id, two_runs.second.run_id

    view = model_pages.compare_view(two_runs.store, [first, second, first])

    assert view.chosen == (first, second)
    assert [chart.title for chart in view.charts] == list(model_pages.COMPARED_TAGS)
    for chart in view.charts:
        assert [series.tag for series in chart.series] == [first, second]
    assert view.accuracy_runs == (first, second)  # oldest first
    assert [value for _, value in view.accuracy.series[0].points] == [
        two_runs.first.eval_accuracy,
        two_runs.second.eval_accuracy,
    ]
