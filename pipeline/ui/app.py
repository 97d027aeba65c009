"""The `imgpipe ui` web app: Flask over a read-only ML Metadata store and the artifacts' files.

Every page is a Jinja template over views.py's data. Nothing is written but the label review
file (label_review.py), and only by a form carrying the server's token. A store is
opened per request (ML Metadata's client is not shared across threads). A finished run's page
(with its thumbnails) is kept for the next requests, so its images are served without redoing it.
"""

from __future__ import annotations

import collections
import hmac
import ipaddress
import math
import os
import secrets
import socket
import tempfile
import threading
from collections.abc import Callable

import flask
import werkzeug.routing
from ml_metadata import errors
from ml_metadata.metadata_store import metadata_store

from pipeline import lineage
from pipeline.ui import (
    dataset_page,
    health_page,
    label_review,
    media,
    model_pages,
    predictions_page,
    readable,
    report,
    views,
)

RUN_PAGES_KEPT = 8
# Pages are the app's own markup: styles from itself (and the inline bars' widths), scripts only
# its own files (the charts), images from itself or data: URIs, no frame, forms back to itself.
SECURITY_HEADERS = {
    "Content-Security-Policy": "default-src 'none'; script-src 'self'; "
    "style-src 'self' 'unsafe-inline'; "
    "img-src 'self' data:; form-action 'self'; frame-ancestors 'none'; base-uri 'none'",
    "X-Frame-Options": "DENY",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
}
MAX_ID = 2**63 - 1  # ML Metadata ids are int64: a bigger number names nothing


def allowed_hosts(bound: str) -> frozenset[str]:
    """The Host header values the app answers: the bound address, this machine's loopback
    names, and, when bound to every interface, the machine's own names and any address
    literal. Any other name may be a DNS-rebinding page reaching the app through a browser."""
    hosts = {bound.lower(), "localhost", "127.0.0.1", "::1"}
    if bound in ("0.0.0.0", "::", ""):
        hosts |= {socket.gethostname().lower(), socket.getfqdn().lower()}
    return frozenset(hosts)


def host_name(header: str) -> str:
    """The host part of a Host header ("[::1]:8765" -> "::1", "Example:80" -> "example")."""
    header = header.strip().lower()
    if header.startswith("["):
        return header[1:].partition("]")[0]
    return header.partition(":")[0]


def _is_address(host: str) -> bool:
    try:
        ipaddress.ip_address(host)
    except ValueError:
        return False
    return True


def warm_up() -> None:
    """Imports what the pages read metrics and shards with (TFMA, TensorFlow: seconds), so the
    first visitor does not wait for it; run in a thread while the server already answers."""
    import tensorflow  # noqa: F401
    import tensorflow_model_analysis  # noqa: F401


class _IdConverter(werkzeug.routing.IntegerConverter):
    """A non-negative int64 in a URL; a bigger number is no route (404), not a store error."""

    def __init__(self, url_map):
        super().__init__(url_map, max=MAX_ID)


class _KeptViews:
    """The last few views computed, by key: a finished run's page and its thumbnails are served
    from here to the next requests instead of being recomputed."""

    def __init__(self):
        self._views: collections.OrderedDict[str, object] = collections.OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: str, compute: Callable[[], object], keep: Callable[[object], bool]):
        """The kept view of `key`, or compute()'s answer, kept when keep(view) says so."""
        with self._lock:
            if key in self._views:
                self._views.move_to_end(key)
                return self._views[key]
        view = compute()
        if keep(view):
            with self._lock:
                self._views[key] = view
                while len(self._views) > RUN_PAGES_KEPT:
                    self._views.popitem(last=False)
        return view


def create_app(
    open_store: Callable[[], metadata_store.MetadataStore],
    where: str,
    bound: str = "127.0.0.1",
    review_path: str | None = None,
) -> flask.Flask:
    """open_store() gives a read-only store per request; `where` names it in the page footer;
    `bound` is the address the server listens on (which Host headers it answers); review_path
    is the label review file (None: suspects cannot be marked)."""
    app = flask.Flask(__name__)
    app.url_map.converters["id"] = _IdConverter
    app.jinja_env.filters["markdown"] = model_pages.render_markdown
    readable.register(app.jinja_env)
    # A form's token: a page from another site cannot read it, so cannot post a mark.
    token = secrets.token_urlsafe(32)
    review = label_review.Review(review_path) if review_path else None
    _guard(app, bound)
    _explain_failures(app, where, review_path)
    _add_run_routes(app, open_store)
    _add_health_routes(app, open_store, review, token)
    _add_dataset_routes(app, open_store)
    _add_lineage_routes(app, open_store)
    _add_model_routes(app, open_store)
    return app


def _guard(app: flask.Flask, bound: str) -> None:
    """Answers only the Host names of `bound` (no DNS rebinding) and sends the security headers."""
    hosts = allowed_hosts(bound)
    any_address = bound in ("0.0.0.0", "::", "")

    @app.before_request
    def refuse_foreign_hosts():
        host = host_name(flask.request.headers.get("Host", ""))
        if host not in hosts and not (any_address and _is_address(host)):
            message = f"this server does not answer for host {host!r}"
            return flask.render_template("error.html", message=message), 400
        return None

    @app.after_request
    def security_headers(response: flask.Response) -> flask.Response:
        response.headers.update(SECURITY_HEADERS)
        return response


def _explain_failures(app: flask.Flask, where: str, review_path: str | None) -> None:
    """Unknown names are a 404 page saying which, a failing store a 503 naming the store, a
    mark that cannot be kept a 400 saying why."""

    @app.context_processor
    def helpers():
        return {
            "page_url": flask.url_for,
            "standalone": False,
            "store_name": where,
            "review_path": review_path,
        }

    @app.errorhandler(label_review.ReviewError)
    def refused(error):
        return flask.render_template("error.html", message=str(error)), 400

    @app.errorhandler(lineage.LineageError)
    def not_found(error):
        return flask.render_template("error.html", message=str(error)), 404

    @app.errorhandler(errors.StatusError)
    def store_failed(error):
        return flask.render_template("error.html", message=f"{where}: {error}"), 503


def _thumbnail(image: bytes | None) -> flask.Response:
    if image is None:
        flask.abort(404)
    return flask.Response(image, mimetype=media.THUMBNAIL_TYPE)


def _add_run_routes(app: flask.Flask, open_store: Callable[[], metadata_store.MetadataStore]):
    """The runs table, two runs' diff, a run's page, its thumbnails and its one-file report."""
    kept = _KeptViews()

    def run_view(run_id: str) -> views.RunView:
        # A running run's page is always computed afresh; a finished one never changes.
        return kept.get(
            run_id,
            lambda: views.run_view(open_store(), run_id),
            lambda view: view.run.status != "running" and view.run.run_id == run_id,
        )

    @app.get("/")
    def runs():
        rows = views.runs_view(open_store())
        return flask.render_template("runs.html", rows=rows)

    @app.get("/diff")
    def diff():
        chosen = flask.request.args.getlist("run")
        if len(chosen) != 2:
            raise lineage.LineageError(f"choose two runs to compare, not {len(chosen)}")
        return flask.render_template("diff.html", view=views.diff_view(open_store(), *chosen))

    @app.get("/run/<run_id>")
    def run(run_id: str):
        view = run_view(run_id)

        def image_src(kind: str, index: int) -> str:
            return flask.url_for("run_image", run_id=view.run.run_id, kind=kind, index=index)

        return flask.render_template("run.html", view=view, image_src=image_src)

    @app.get("/run/<run_id>/<any(rejected, mistake, gradcam):kind>/<id:index>.jpg")
    def run_image(run_id: str, kind: str, index: int):
        return _thumbnail(run_view(run_id).images.get((kind, index)))

    @app.get("/run/<run_id>/report.html")
    def run_report(run_id: str):
        return flask.Response(report.render(run_view(run_id)), mimetype="text/html")


def _add_health_routes(
    app: flask.Flask,
    open_store: Callable[[], metadata_store.MetadataStore],
    review: label_review.Review | None,
    token: str,
):
    """A run's data health page and its thumbnails (kept by run id: a written report never
    changes); the review of its likely label errors and the manifest corrected by it."""
    kept = _KeptViews()

    def health_view(run_id: str) -> health_page.HealthView:
        def compute() -> health_page.HealthView:
            view = health_page.health_view(open_store(), run_id)
            if view is None:
                raise lineage.LineageError(f"run {run_id} has no data health report")
            return view

        return kept.get(run_id, compute, lambda view: view.run.run_id == run_id)

    @app.get("/run/<run_id>/health")
    def run_health(run_id: str):
        view = health_view(run_id)
        marks = review.marks(view.run.run_id) if review else {}
        return flask.render_template("health.html", view=view, marks=marks, token=token)

    @app.post("/run/<run_id>/health/review")
    def review_suspect(run_id: str):
        form = flask.request.form
        if not hmac.compare_digest(form.get("token", ""), token):
            message = "this form is not from this server's page: reload the page and mark again"
            return flask.render_template("error.html", message=message), 403
        if review is None:
            raise label_review.ReviewError("this store keeps no label review (not a SQLite store)")
        view = health_view(run_id)
        suspect = next((s for s in view.suspects if s.path == form.get("path")), None)
        if suspect is None:
            raise lineage.LineageError(f"{form.get('path')!r} is no suspect of run {run_id}")
        chosen = form.get("label", "")
        label = chosen if chosen in view.run.class_names else suspect.suggested
        verdict = form.get("verdict", "")
        review.mark(view.run.run_id, view.data_root, suspect.path, verdict, label)
        anchor = f"suspect-{view.suspects.index(suspect)}"
        return flask.redirect(
            flask.url_for("run_health", run_id=view.run.run_id, _anchor=anchor), code=303
        )

    @app.get("/run/<run_id>/health/corrected.csv")
    def corrected_manifest(run_id: str):
        view = health_view(run_id)
        if not view.data_root:
            raise lineage.LineageError(f"run {run_id}'s ingest report, naming its input, is gone")
        marks = review.marks(view.run.run_id) if review else {}
        text = label_review.corrected_manifest(view.data_root, marks)
        name = report.summary_file_name(f"{view.run.pipeline}-{view.run.run_id}-corrected")
        return flask.Response(
            text,
            mimetype="text/csv",
            headers={"Content-Disposition": f'attachment; filename="{name}.csv"'},
        )

    @app.get("/run/<run_id>/health/<int:index>.jpg")
    def run_health_image(run_id: str, index: int):
        return _thumbnail(health_view(run_id).images.get(index))


def _confidence(name: str, default: float) -> float:
    text = flask.request.args.get(name, "").strip()
    try:
        value = float(text) if text else default
    except ValueError:
        value = math.nan
    if not 0 <= value <= 1:
        raise lineage.LineageError(f"confidence {name}: {text!r} is not a number from 0 to 1")
    return value


def _add_dataset_routes(app: flask.Flask, open_store: Callable[[], metadata_store.MetadataStore]):
    """Every image of a finished run's span or of a recorded predictions file, filtered and
    paginated, and their thumbnails (kept: neither ever changes)."""
    kept = _KeptViews()

    def dataset(run_id: str) -> dataset_page.Dataset:
        return kept.get(
            run_id,
            lambda: dataset_page.dataset(open_store(), run_id),
            lambda found: found.run.run_id == run_id,
        )

    @app.get("/data")
    def latest_data():
        runs = lineage.list_runs(open_store(), metrics=False)  # newest first
        finished = [run for run in runs if run.status != "running" and run.examples_id]
        if not finished:
            raise lineage.LineageError("no finished run with a dataset in this store")
        return flask.redirect(flask.url_for("run_data", run_id=finished[0].run_id))

    def predictions(artifact_id: int) -> predictions_page.Predictions:
        # Kept as first read: a later --output to the same path records another artifact.
        return kept.get(
            f"predictions {artifact_id}",
            lambda: predictions_page.predictions(open_store(), artifact_id),
            lambda found: True,
        )

    @app.get("/run/<run_id>/data")
    def run_data(run_id: str):
        shown = dataset_page.page(dataset(run_id), _filters(), _page_number())
        recorded = predictions_page.recorded(open_store())
        return flask.render_template("data.html", view=shown, recorded=recorded)

    @app.get("/run/<run_id>/data/<id:index>.jpg")
    def run_data_image(run_id: str, index: int):
        return _thumbnail(dataset(run_id).images.get(index))

    @app.get("/predictions/<id:artifact_id>")
    def predictions_data(artifact_id: int):
        shown = dataset_page.page(predictions(artifact_id), _filters(), _page_number())
        return flask.render_template("predictions.html", view=shown)

    @app.get("/predictions/<id:artifact_id>/<id:index>.jpg")
    def predictions_image(artifact_id: int, index: int):
        return _thumbnail(predictions(artifact_id).images.get(index))


def _filters() -> dataset_page.Filters:
    arguments = flask.request.args
    return dataset_page.Filters(
        label=arguments.get("class", ""),
        split=arguments.get("split", ""),
        predicted=arguments.get("predicted", ""),
        correct=arguments.get("correct", ""),
        flag=arguments.get("flag", ""),
        low=_confidence("low", 0.0),
        high=_confidence("high", 1.0),
    )


def _page_number() -> int:
    number = flask.request.args.get("page", "1")
    return int(number) if number.isdigit() else 1


def _add_lineage_routes(app: flask.Flask, open_store: Callable[[], metadata_store.MetadataStore]):
    """A model's lineage picture, a dataset's lineage and the search for an image's datasets."""

    @app.get("/lineage")
    def latest_lineage():
        image_path = flask.request.args.get("image", "").strip()
        if image_path:
            found = lineage.image_lineage(open_store(), image_path, only_data_roots=True)
            return flask.render_template("image.html", found=found)
        view = views.lineage_view(open_store(), None)
        return flask.render_template("lineage.html", view=view)

    @app.get("/lineage/model/<id:artifact_id>")
    def model_lineage(artifact_id: int):
        view = views.lineage_view(open_store(), artifact_id)
        return flask.render_template("lineage.html", view=view)

    @app.get("/lineage/examples/<id:examples_id>")
    def examples_lineage(examples_id: int):
        found = lineage.examples_lineage(open_store(), examples_id)
        return flask.render_template("examples.html", found=found)


def _add_model_routes(app: flask.Flask, open_store: Callable[[], metadata_store.MetadataStore]):
    """The model versions, a model's page and downloads, and the comparison of runs."""

    @app.get("/models")
    def models():
        return flask.render_template("models.html", versions=model_pages.models_view(open_store()))

    @app.get("/models/<id:model_id>")
    def model(model_id: int):
        view = model_pages.model_view(open_store(), model_id)
        return flask.render_template("model.html", view=view)

    @app.get("/models/<id:model_id>/saved_model.tar.gz")
    def model_archive(model_id: int):
        view = model_pages.model_view(open_store(), model_id)
        if not view.has_saved_model:
            flask.abort(404)
        archive = tempfile.TemporaryFile()  # noqa: SIM115  Flask closes it after sending
        model_pages.saved_model_archive(view.version.folder, archive)
        archive.seek(0)
        name = f"{view.version.run.pipeline}-{view.version.version}-saved_model.tar.gz"
        return flask.send_file(archive, mimetype="application/gzip", download_name=name)

    @app.get("/models/<id:model_id>/files/<path:name>")
    def model_file(model_id: int, name: str):
        view = model_pages.model_view(open_store(), model_id)
        if name not in view.files:  # only the files the page lists, never another path
            flask.abort(404)
        return flask.send_file(  # absolute: Flask reads a relative path from its package
            os.path.abspath(os.path.join(view.version.folder, view.files[name])),
            as_attachment=not name.endswith(".png"),
        )

    @app.get("/compare")
    def compare():
        arguments = flask.request.args
        view = model_pages.compare_view(
            open_store(),
            arguments.getlist("run"),
            sort=arguments.get("sort", "run"),
            descending=arguments.get("order", "desc") != "asc",
            query=arguments.get("q", ""),
            status=arguments.get("status", ""),
        )
        return flask.render_template("compare.html", view=view, columns=model_pages.COLUMNS)
