"""A real two-run store for the UI tests, built once per session by the tiny pipeline: the
images hold a duplicate (its bytes decode: a thumbnail), an empty and a truncated file (no
thumbnail) and a text file (ignored); the second run changes the learning rate. And the app
serving it on a free local port."""

import threading

import pytest
from werkzeug.serving import make_server

from pipeline.mlmd_connection import MlmdTarget
from pipeline.ui.app import create_app
from tests.data_prep import image_files
from tests.pipeline.tiny_pipeline import TwoRuns, run_twice, write_images

DUPLICATE, EMPTY, TRUNCATED, IGNORED = "cat/copy.jpg", "dog/empty.jpg", "owl/cut.jpg", "notes.txt"


@pytest.fixture(scope="session")
def two_runs(tmp_path_factory) -> TwoRuns:
    root = tmp_path_factory.mktemp("ui")
    images = write_images(root / "images")
    (images / DUPLICATE).write_bytes((images / "cat" / "0.jpg").read_bytes())
    (images / EMPTY).write_bytes(b"")
    jpeg = image_files.jpeg(seed=999)
    (images / TRUNCATED).write_bytes(jpeg[: len(jpeg) // 2])
    (images / "cat" / IGNORED).write_text("not an image")
    return run_twice(images, root / "build")


@pytest.fixture(scope="session")
def served(two_runs) -> str:
    """The app over the two-run store (read-only, as `imgpipe ui` opens it); its base URL."""
    target = MlmdTarget(sqlite=two_runs.config.metadata_path)
    server = make_server("127.0.0.1", 0, create_app(target.open, target.describe()), threaded=True)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.port}"
    server.shutdown()
    thread.join()
