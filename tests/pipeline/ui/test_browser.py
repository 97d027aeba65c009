"""The UI in a real browser: headless Chromium from the system's package manager, driven by
Playwright (no browser download), against the app serving the two-run store (conftest.py).

Checks that every page loads with no console error and no failed request, the runs table has
both runs, the gallery's images, their Grad-CAM overlays and the rejected files' thumbnails load
(natural width > 0), the lineage picture is there and its nodes lead to pages, the diff shows the
changed setting, the model pages show the rendered card, the confusion matrix and working
downloads, the comparison sorts, filters and overlays curves, and the self-contained report
shows its images with nothing fetched from the network; a suspect marked on the health page is
relabelled in the exported manifest, which a run then trains on; a recorded predictions file
is shown and filtered like a span. With
IMGPIPE_UI_SCREENSHOT=path the run page's screenshot (the README's) is written there.
"""

import json
import os
import shutil
import subprocess
import sys

import pytest

from pipeline import exit_codes, lineage
from pipeline.runners.local import open_store
from pipeline.ui import report
from tests.pipeline.tiny_pipeline import CHECKOUT, SECOND_RATE
from tests.pipeline.two_run_store import ACCEPTED, DUPLICATE, FOUND
from tests.pipeline.ui.conftest import SUGGESTED, SUSPECT
from tests.required import require

CHROMIUM = next(
    (found for name in ("chromium", "chromium-browser") if (found := shutil.which(name))), None
)
pytestmark = pytest.mark.slow


@pytest.fixture(scope="module", autouse=True)
def chromium():
    require(CHROMIUM, "Chromium on PATH", "chromium")


SCREENSHOT_VIEWPORT = {"width": 1100, "height": 900}


class Browser:
    """One page that records console errors, uncaught exceptions and failed requests."""

    def __init__(self, page):
        self.page, self.problems = page, []
        page.on("console", lambda m: m.type == "error" and self.problems.append(m.text))
        page.on("pageerror", lambda error: self.problems.append(str(error)))
        page.on("requestfailed", lambda r: self.problems.append(f"{r.url}: {r.failure}"))
        page.on(
            "response",
            lambda r: r.status >= 400 and self.problems.append(f"{r.url}: HTTP {r.status}"),
        )

    def open(self, url: str):
        response = self.page.goto(url, wait_until="load")
        assert response.status == 200, f"{url}: HTTP {response.status}"
        assert self.problems == [], f"{url}: {self.problems}"
        return self.page

    def widths(self, selector: str) -> list[int]:
        return self.page.eval_on_selector_all(selector, "images => images.map(i => i.naturalWidth)")


@pytest.fixture(scope="module")
def browser():
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=CHROMIUM, headless=True)
        context = chromium.new_context(viewport=SCREENSHOT_VIEWPORT)
        yield Browser(context.new_page())
        chromium.close()


def _hovered_values(chart) -> list[str]:
    """The legend's value of each series with the pointer in the middle of the plot."""
    chart.locator(".u-over").hover()
    values = chart.locator(".u-legend .u-series .u-value")
    return values.all_inner_texts()[1:]  # the first is the x axis'


def test_the_runs_table_has_both_runs_and_compares_the_two_selected(browser, served, two_runs):
    page = browser.open(served + "/")
    rows = page.eval_on_selector_all("#runs tbody tr", "rows => rows.map(r => r.dataset.run)")
    assert rows == [two_runs.second.run_id, two_runs.first.run_id]
    for run in (two_runs.first, two_runs.second):
        page.check(f"input[value='{run.run_id}']")
    page.click("#compare")
    page.wait_for_load_state("load")
    row = page.locator("#diff tr[data-key='config.trainer.learning_rate']")
    assert row.locator("td").nth(3).inner_text() == str(SECOND_RATE)
    assert browser.problems == []


def test_the_run_page_shows_the_gallery_thumbnails_and_curves(browser, served, two_runs):
    page = browser.open(f"{served}/run/{two_runs.first.run_id}")
    mistakes = browser.widths("#gallery img.photo")
    assert mistakes and all(width > 0 for width in mistakes)
    assert page.locator("figure.mistake").count() == len(mistakes)
    overlays = browser.widths("#gallery img.gradcam")  # a Grad-CAM beside every mistake
    assert len(overlays) == len(mistakes) and all(width > 0 for width in overlays)
    rejected = page.locator("figure.rejected", has_text=DUPLICATE)
    assert rejected.locator("img").evaluate("image => image.naturalWidth") > 0
    charts = page.locator("#training + .charts figure.chart")
    assert charts.count() >= 4 and charts.locator(".uplot canvas").count() == charts.count()
    assert charts.first.locator(".u-axis").count() == 2  # drawn by uPlot: x and value axes
    assert "train/step_loss" in charts.first.locator(".u-legend").inner_text()
    assert _hovered_values(charts.nth(1)) != ["-"] * 2  # accuracy: values read on hover
    assert page.locator("#confusion tbody tr").count() == 3
    assert page.locator("#model-card + .rendered table").count() >= 2  # the card, rendered
    if os.environ.get("IMGPIPE_UI_SCREENSHOT"):  # the README's: metrics, confusion matrix, gallery
        page.evaluate("document.getElementById('evaluation').scrollIntoView()")
        page.screenshot(path=os.environ["IMGPIPE_UI_SCREENSHOT"])
    browser.open(f"{served}/run/{two_runs.second.run_id}")


def test_the_model_pages_show_the_card_the_confusion_matrix_and_downloads(
    browser, served, two_runs
):
    page = browser.open(served + "/models")
    page.click(f"#models tr[data-model='{two_runs.first.model_id}'] a")
    page.wait_for_load_state("load")
    assert page.url.endswith(f"/models/{two_runs.first.model_id}")
    assert browser.widths("#confusion-matrix")[0] > 0
    assert page.locator("#card table").count() >= 2  # the card's tables, rendered
    assert page.locator("#gates tbody tr").count() >= 3
    links = page.eval_on_selector_all("#files a", "links => links.map(a => a.href)")
    assert any(link.endswith("saved_model.tar.gz") for link in links)
    assert any(link.endswith("model_float32.tflite") for link in links)
    for link in links:
        response = page.request.get(link)
        assert response.status == 200 and len(response.body()) > 0, link
    assert browser.problems == []


def test_the_comparison_sorts_filters_and_overlays_the_ticked_runs(browser, served, two_runs):
    first, second = two_runs.first.run_id, two_runs.second.run_id
    page = browser.open(served + "/compare")

    def listed():
        return page.eval_on_selector_all(
            "#compared tbody tr", "rows => rows.map(r => r.dataset.run)"
        )

    page.click("#compared a[data-sort='run']")  # sorted by run id, newest first: flip it
    page.wait_for_load_state("load")
    assert listed() == [first, second]
    settings = page.locator("#compared th.setting").all_inner_texts()
    assert settings == ["trainer.learning_rate"]  # the one setting the runs differ in
    page.fill("input[name=q]", second)
    page.click("#apply")
    page.wait_for_load_state("load")
    assert listed() == [second]
    browser.open(served + "/compare")
    for run_id in (first, second):
        page.check(f"#compared input[value='{run_id}']")
    page.click("#draw")
    page.wait_for_load_state("load")
    curves = page.locator("#curves + .charts .chart")
    assert curves.count() >= 2
    assert len(_hovered_values(curves.first)) == 2  # one series per ticked run
    accuracy = page.locator("#accuracy + .charts .chart")
    assert accuracy.locator(".u-legend").inner_text().count("eval accuracy") == 1
    assert browser.problems == []


def test_the_lineage_picture_is_there_and_its_nodes_lead_to_pages(browser, served, two_runs):
    page = browser.open(served + "/lineage")
    assert page.locator("#lineage-graph rect").count() >= 8
    edges = page.eval_on_selector_all(
        "#lineage-graph path.edge", "p => p.map(e => e.getTotalLength())"
    )
    assert len(edges) >= 8 and all(length > 0 for length in edges)
    links = page.eval_on_selector_all("#lineage-graph a", "nodes => nodes.map(a => a.href.baseVal)")
    assert any("/lineage/examples/" in link for link in links)
    assert any(f"/run/{two_runs.first.run_id}" in link for link in links)
    for link in sorted(set(links)):
        browser.open(served + link)
    browser.open(f"{served}/lineage/model/{two_runs.second.model_id}")


def test_the_image_search_finds_the_datasets_that_used_an_image(browser, served, two_runs):
    page = browser.open(served + "/")
    page.fill("input[name=image]", str(two_runs.images / "cat" / "1.jpg"))
    page.click("#search")
    page.wait_for_load_state("load")
    assert page.locator("#matches tbody tr").count() == 1  # one dataset: the data never changed
    assert browser.problems == []


def test_the_self_contained_report_shows_its_images_without_the_network(browser, two_runs):
    requested = []
    browser.page.on("request", lambda r: requested.append(r.url))
    path = report.report_path(two_runs.config.pipeline_root, two_runs.first.run_id)
    page = browser.open("file://" + os.path.abspath(path))
    header = page.evaluate("getComputedStyle(document.querySelector('header')).backgroundColor")
    assert header == "rgb(17, 24, 39)"  # the inline stylesheet applies
    widths = browser.widths("img")
    assert widths and all(width > 0 for width in widths)
    assert [url for url in requested if not url.startswith(("file:", "data:"))] == []


def _every_page(two_runs) -> list[str]:
    first, second = two_runs.first, two_runs.second
    both = f"run={first.run_id}&run={second.run_id}"
    return [
        "/",
        "/compare",
        f"/compare?{both}",
        f"/diff?{both}",
        "/models",
        f"/models/{first.model_id}",
        "/lineage",
        f"/lineage/examples/{first.examples_id}",
        f"/lineage?image={two_runs.images / 'cat' / '1.jpg'}",
        f"/run/{first.run_id}",
        f"/run/{second.run_id}",
        f"/run/{first.run_id}/health",
        f"/run/{first.run_id}/data",
    ]


def _reviewed_pages(reviewed) -> list[str]:
    """The pages that show a review and a predictions file: only the reviewed store has them."""
    return [
        f"/run/{reviewed.run_id}/health",
        f"/run/{reviewed.run_id}/data",
        f"/predictions/{reviewed.predictions_id}",
    ]


@pytest.mark.parametrize("width", [1400, 1024])
def test_no_page_scrolls_sideways(browser, served, reviewed, two_runs, width):
    """Long paths and reasons wrap, wide tables and the lineage graph scroll in their own box."""
    page = browser.page
    page.set_viewport_size({"width": width, "height": 900})
    urls = [served + path for path in _every_page(two_runs)]
    urls += [reviewed.url + path for path in _reviewed_pages(reviewed)]
    try:
        for url in urls:
            browser.open(url)
            page.wait_for_load_state("networkidle")  # charts and lazy thumbnails laid out
            scroll, client = page.evaluate(
                "[document.documentElement.scrollWidth, document.documentElement.clientWidth]"
            )
            assert scroll <= client, f"{url} at {width} px: {scroll} px wide"
    finally:
        page.set_viewport_size(SCREENSHOT_VIEWPORT)


def test_the_data_page_shows_every_image_and_its_filters_change_the_grid(browser, served, two_runs):
    page = browser.open(f"{served}/data")  # the header's link: the newest finished run's
    assert page.url.endswith(f"/run/{two_runs.second.run_id}/data")
    page.wait_for_load_state("networkidle")  # its lazy thumbnails, before leaving
    page = browser.open(f"{served}/run/{two_runs.first.run_id}/data")

    def grid() -> list[dict]:
        return page.eval_on_selector_all(
            "#grid figure.datum", "figures => figures.map(f => Object.assign({}, f.dataset))"
        )

    every = grid()
    assert len(every) == ACCEPTED
    page.evaluate("window.scrollTo(0, document.body.scrollHeight)")  # the lazy ones load
    page.wait_for_load_state("networkidle")
    widths = browser.widths("#grid img")
    assert len(widths) == ACCEPTED and all(width > 0 for width in widths)
    page.select_option("select[name=split]", "eval")
    page.click("#apply")
    page.wait_for_load_state("load")
    evaluated = grid()
    assert 0 < len(evaluated) < ACCEPTED and {f["split"] for f in evaluated} == {"eval"}
    chosen = evaluated[0]["class"]
    page.select_option("select[name=class]", chosen)
    page.click("#apply")
    page.wait_for_load_state("load")
    assert {(f["split"], f["class"]) for f in grid()} == {("eval", chosen)}
    assert page.locator("#grid figcaption", has_text="eval").count() == len(grid())
    assert browser.problems == []


def test_a_confirmed_suspect_is_relabelled_in_the_exported_manifest_a_run_trains_on(
    browser, reviewed, tmp_path
):
    page = browser.open(f"{reviewed.url}/run/{reviewed.run_id}/health")
    suspect = page.locator(f"#suspects figure.suspect[data-path='{SUSPECT}']")
    suspect.locator("button[value=unsure]").click()
    page.wait_for_load_state("load")
    assert suspect.get_attribute("data-verdict") == "unsure"
    suspect.locator("button[value=confirmed]").click()  # a second thought replaces the first
    page.wait_for_load_state("load")
    assert suspect.get_attribute("data-verdict") == "confirmed"
    assert f"now {SUGGESTED}" in suspect.inner_text()
    assert "1 confirmed" in page.locator("#review-summary").inner_text()
    with open(reviewed.review_path) as handle:
        kept = json.load(handle)[reviewed.run_id]
    assert kept == {SUSPECT: {"verdict": "confirmed", "label": SUGGESTED}}
    with page.expect_download() as started:
        page.click("#export")
    manifest = tmp_path / "corrected.csv"
    started.value.save_as(manifest)
    assert browser.problems == []
    # The manifest as a user gives it to a run: the image now trains under its new label.
    build = tmp_path / "build"
    command = [sys.executable, "-m", "pipeline.cli", "run", "--preset", "runlocal"]
    command += ["--data", str(manifest), "--build-dir", str(build)]
    environment = {**os.environ, "PYTHONPATH": str(CHECKOUT)}
    finished = subprocess.run(command, capture_output=True, text=True, env=environment)
    assert finished.returncode in (exit_codes.OK, exit_codes.NOT_PUSHED), finished.stderr
    store = open_store(str(build / "tfx" / "metadata.db"))
    [used] = lineage.image_lineage(store, str(reviewed.images / SUSPECT)).matches
    assert used.label == SUGGESTED
    [other] = lineage.image_lineage(store, str(reviewed.images / "cat" / "4.jpg")).matches
    assert other.label == "cat"


def test_a_recorded_predictions_file_is_shown_like_a_span_and_filtered(browser, reviewed):
    page = browser.open(f"{reviewed.url}/run/{reviewed.run_id}/data")
    page.wait_for_load_state("networkidle")  # its lazy thumbnails, before leaving
    page.click(f"#recorded a[href$='/predictions/{reviewed.predictions_id}']")
    page.wait_for_load_state("load")
    page.evaluate("window.scrollTo(0, document.body.scrollHeight)")  # the lazy ones load
    page.wait_for_load_state("networkidle")

    def grid() -> list[dict]:
        return page.eval_on_selector_all(
            "#grid figure.datum", "figures => figures.map(f => Object.assign({}, f.dataset))"
        )

    every = grid()
    scored = [f for f in every if f["predicted"]]
    assert len(every) == FOUND and len(scored) == FOUND - 3  # two files refused, one ignored
    assert {f["correct"] for f in scored} <= {"yes", "no"}  # class folders: labelled
    widths = browser.widths("#grid img")
    assert len(widths) >= ACCEPTED and all(width > 0 for width in widths)
    chosen = scored[0]["predicted"]
    page.select_option("select[name=predicted]", chosen)
    page.click("#apply")
    page.wait_for_load_state("networkidle")  # its lazy thumbnails, before leaving
    assert {f["predicted"] for f in grid()} == {chosen}
    page.select_option("select[name=predicted]", "")
    page.fill("input[name=low]", "0.5")
    page.click("#apply")
    page.wait_for_load_state("networkidle")
    kept = grid()
    assert all(float(f["confidence"]) >= 0.5 for f in kept)
    assert len(kept) == sum(float(f["confidence"]) >= 0.5 for f in scored)
    assert browser.problems == []
