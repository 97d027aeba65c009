"""The run page as one self-contained HTML file (style and chart scripts inline, thumbnails as
data: URIs, no links to the app), for CI artifacts and e-mail: `imgpipe report`, and beside every
local run's summary.
"""

from __future__ import annotations

import base64
import functools
import importlib.resources
import os

import jinja2
from ml_metadata.metadata_store import metadata_store

from pipeline import lineage
from pipeline.ui import media, model_pages, readable, views

REPORT_SUFFIX = ".html"
# Under the pipeline root: each run's report, and each scheduled run's summary (<run id>.json).
SUMMARIES_DIR = "run_summaries"
# Inlined in this order, as the app's pages link them (templates/base.html).
STYLES = ("uPlot.min.css", "style.css")
SCRIPTS = ("uPlot.iife.min.js", "charts.js")


@functools.lru_cache(maxsize=1)
def _environment() -> jinja2.Environment:
    """The app's templates, outside Flask: page_url gives no address, so nothing links out."""
    environment = jinja2.Environment(
        loader=jinja2.PackageLoader("pipeline.ui", "templates"),
        autoescape=jinja2.select_autoescape(),
        undefined=jinja2.StrictUndefined,
    )
    static = importlib.resources.files("pipeline.ui").joinpath("static")
    css = "\n".join(static.joinpath(name).read_text() for name in STYLES)
    scripts = "\n".join(static.joinpath(name).read_text() for name in SCRIPTS)
    environment.filters["markdown"] = model_pages.render_markdown
    readable.register(environment)
    environment.globals.update(
        page_url=lambda endpoint, **arguments: None,
        standalone=True,
        css=css,
        scripts=scripts,
        store_name="",
    )
    return environment


def render(view: views.RunView) -> str:
    def image_src(kind: str, index: int) -> str:
        encoded = base64.b64encode(view.images[(kind, index)]).decode()
        return f"data:{media.THUMBNAIL_TYPE};base64,{encoded}"

    return _environment().get_template("run.html").render(view=view, image_src=image_src)


def write_report(
    store: metadata_store.MetadataStore, run_spec: str, output: str
) -> lineage.PipelineRun:
    """Writes the run's page to `output`; returns the run."""
    view = views.run_view(store, run_spec)
    folder = os.path.dirname(os.path.abspath(output))
    os.makedirs(folder, exist_ok=True)
    with open(output, "w", encoding="utf-8") as handle:
        handle.write(render(view))
    return view.run


def report_path(pipeline_root: str, run_id: str) -> str:
    """Beside the run's summary: <pipeline root>/run_summaries/<run id>.html."""
    return os.path.join(pipeline_root, SUMMARIES_DIR, summary_file_name(run_id) + REPORT_SUFFIX)


def summary_file_name(run_id: str) -> str:
    """A run id as a file name (Airflow's ids hold ':' and '+'); also names the run's report."""
    return "".join(c if c.isalnum() or c in "-_." else "_" for c in run_id)
