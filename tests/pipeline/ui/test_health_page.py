"""The data health page against the real two-run store (tests/pipeline/two_run_store.py)."""

import json
import os

import pytest

from pipeline import lineage
from pipeline.mlmd_connection import MlmdTarget
from pipeline.ui import health_page
from pipeline.ui.app import create_app

pytestmark = pytest.mark.slow


def test_the_health_view_shows_what_the_data_health_artifact_holds(two_runs):
    view = health_page.health_view(two_runs.store, two_runs.first.run_id)
    artifact = lineage.run_artifacts(two_runs.store, view.run)["data_health"]
    with open(os.path.join(artifact.uri, "health.json")) as handle:
        written = json.load(handle)
    assert len(view.clusters) == len(written["near_duplicates"]["members"])
    assert [s.path for s in view.suspects] == [i["path"] for i in written["label_issues"]][:40]
    assert all(s.index >= 0 and view.images[s.index][:2] == b"\xff\xd8" for s in view.suspects)
    assert set(view.odd_per_class) == {"cat", "dog", "owl"}
    assert view.counts["eval_images_checked"] == written["eval_images_checked"]


def test_the_health_page_and_its_thumbnails_are_served(two_runs):
    target = MlmdTarget(sqlite=two_runs.config.metadata_path)
    client = create_app(target.open, target.describe()).test_client()
    run_id = two_runs.first.run_id
    page = client.get(f"/run/{run_id}/health")
    assert page.status_code == 200
    text = page.get_data(as_text=True)
    assert "Near-duplicate clusters" in text and "Likely label errors" in text
    assert f"/run/{run_id}/health" in client.get(f"/run/{run_id}").get_data(as_text=True)
    view = health_page.health_view(two_runs.store, run_id)
    if view.images:
        image = client.get(f"/run/{run_id}/health/0.jpg")
        assert image.status_code == 200 and image.mimetype == "image/jpeg"
    assert client.get(f"/run/{run_id}/health/9999.jpg").status_code == 404
