"""The app serving the session's two-run store (tests/pipeline/two_run_store.py) on a free local
port, opened read-only as `imgpipe ui` opens it."""

import threading

import pytest
from werkzeug.serving import make_server

from pipeline.mlmd_connection import MlmdTarget
from pipeline.ui.app import create_app


@pytest.fixture(scope="session")
def served(two_runs) -> str:
    """The app over the two-run store; its base URL."""
    target = MlmdTarget(sqlite=two_runs.config.metadata_path)
    server = make_server("127.0.0.1", 0, create_app(target.open, target.describe()), threaded=True)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.port}"
    server.shutdown()
    thread.join()
