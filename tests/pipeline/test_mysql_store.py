"""The pipeline on a real MySQL-protocol ML Metadata store (MariaDB from the system's package
manager, started on 127.0.0.1 by the test): two runs write it, the second answered from its cache
up to the Evaluator, and `imgpipe runs`, `runs diff` and `imgpipe lineage` answer from it.
Skipped, saying why, where MariaDB is not installed."""

import dataclasses
import json

import pytest

from pipeline.cli import main
from pipeline.mlmd_connection import MlmdTarget
from pipeline.runners.local import run_local
from tests.mysql_server import mysql_server, server_binaries
from tests.pipeline.tiny_pipeline import tiny_config, write_images
from tests.required import require

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    require(server_binaries(), "MariaDB", "mariadb-server")
    with mysql_server(tmp_path_factory.mktemp("mariadb")) as running:
        yield running


def test_two_runs_on_mysql_are_listed_diffed_and_traced(server, tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("IMGPIPE_MLMD_PASSWORD", server.password)
    target = MlmdTarget(mysql=server.address, user=server.user, password=server.password)
    images = write_images(tmp_path / "images")
    config = tiny_config(images, tmp_path / "build")
    first = run_local(config, store_target=target)
    # Only the Evaluator's threshold changes: the cache, looked up in MySQL, answers the rest.
    second = run_local(dataclasses.replace(config, min_accuracy=1.0), store_target=target)
    assert (first.status, second.status) == ("complete", "complete")
    states = {c.node: c.state for c in second.components}
    assert states["Trainer"] == "cached" and states["Evaluator"] == "ran"
    assert second.model_id == first.model_id and second.pushed_to is None
    assert not (tmp_path / "build" / "tfx" / "metadata.db").exists()  # nothing went to SQLite

    capsys.readouterr()  # what the runs printed
    store = ["--mlmd-mysql", server.address, "--mlmd-user", server.user]
    assert main(["runs", "--json", *store]) == 0
    runs = json.loads(capsys.readouterr().out)
    assert [run["run_id"] for run in runs] == [second.run_id, first.run_id]
    assert runs[0]["components"][0]["node"] == "ImageExampleGen"

    assert main(["runs", "diff", first.run_id, second.run_id, "--json", *store]) == 0
    changes = json.loads(capsys.readouterr().out)["changes"]
    threshold = "eval.metrics_specs[0].metrics[1].threshold.value_threshold.lower_bound"
    assert {"section": "config", "key": threshold, "a": 0.0, "b": 1.0} in changes

    assert main(["lineage", "model", str(second.model_id), "--json", *store]) == 0
    lineage = json.loads(capsys.readouterr().out)
    assert lineage["model"]["id"] == second.model_id
    assert lineage["dataset"]["examples"]["id"] == second.examples_id
