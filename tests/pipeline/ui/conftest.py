"""The app serving the session's two-run store (tests/pipeline/two_run_store.py) on a free local
port, opened read-only as `imgpipe ui` opens it; and a copy of that store to review, with a
suspect and a recorded predictions file."""

import dataclasses
import json
import pathlib
import shutil
import threading

import pytest
from werkzeug.serving import make_server

from pipeline.mlmd_connection import MlmdTarget
from pipeline.ui.app import create_app
from pipeline.ui.label_review import review_path_beside

SUSPECT, SUGGESTED = "cat/3.jpg", "dog"


def _serve(app):
    server = make_server("127.0.0.1", 0, app, threaded=True)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    return server, thread


@pytest.fixture(scope="session")
def served(two_runs) -> str:
    """The app over the two-run store; its base URL."""
    target = MlmdTarget(sqlite=two_runs.config.metadata_path)
    server, thread = _serve(create_app(target.open, target.describe()))
    yield f"http://127.0.0.1:{server.port}"
    server.shutdown()
    thread.join()


@dataclasses.dataclass(frozen=True)
class Reviewed:
    url: str  # the app's base URL
    store_path: str
    review_path: str
    run_id: str
    predictions_id: int
    images: pathlib.Path


@pytest.fixture(scope="session")
def reviewed(two_runs, tmp_path_factory) -> Reviewed:
    """The app, with its review file, over a copy of the two-run store whose first run's health
    report lists one likely label error (the tiny runs' audit scores at chance, so lists none)
    and which holds an `imgpipe predict` of the images, recorded."""
    from components import metadata_keys
    from pipeline import lineage
    from pipeline.cli import main
    from pipeline.runners.local import open_store

    root = tmp_path_factory.mktemp("reviewed")
    store_path = str(root / "store" / "metadata.db")
    (root / "store").mkdir()
    shutil.copyfile(two_runs.config.metadata_path, store_path)
    store = open_store(store_path)
    run = lineage.find_run(lineage.list_runs(store, metrics=False), two_runs.first.run_id)
    health = lineage.run_artifacts(store, run)["data_health"]
    folder = root / "data_health"
    shutil.copytree(health.uri, folder)
    report = json.loads((folder / "health.json").read_text())
    report["label_issues"] = [
        {"path": SUSPECT, "given": "cat", "predicted": SUGGESTED, "confidence": 0.9}
    ]
    (folder / "health.json").write_text(json.dumps(report))
    [artifact] = store.get_artifacts_by_id([health.id])
    artifact.uri = str(folder)
    store.put_artifacts([artifact])
    output = root / "predictions.csv"
    main(
        ["predict", "--data", str(two_runs.images), "--output", str(output)]
        + ["--mlmd-sqlite", store_path]
    )
    [recorded] = store.get_artifacts_by_type(metadata_keys.PREDICTIONS_TYPE)
    target = MlmdTarget(sqlite=store_path)
    review_path = review_path_beside(store_path)
    app = create_app(target.open, target.describe(), review_path=review_path)
    server, thread = _serve(app)
    yield Reviewed(
        f"http://127.0.0.1:{server.port}",
        store_path,
        review_path,
        run.run_id,
        recorded.id,
        two_runs.images,
    )
    server.shutdown()
    thread.join()
