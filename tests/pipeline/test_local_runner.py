"""The local runner end to end on tiny data: every component runs, a re-run is answered from the
cache, and a changed image invalidates exactly the data-dependent components."""

import dataclasses

import pytest

from pipeline.config import local_preset
from pipeline.local_runner import open_store, run_local, summarize_latest_run
from tests.data_prep import image_files

pytestmark = pytest.mark.slow
IN_PROCESS = ("--direct_running_mode=in_memory", "--direct_num_workers=1")


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    root = tmp_path_factory.mktemp("local")
    images = root / "images"
    for label_index, label in enumerate(("cat", "dog", "owl")):
        for i in range(10):
            path = images / label / f"{i}.jpg"
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(image_files.jpeg(seed=100 * label_index + i))
    config = dataclasses.replace(
        local_preset(str(images), str(root / "build")), beam_args=IN_PROCESS
    )
    return config, images, run_local(config)


def test_first_run_runs_every_component(setup):
    _, _, summary = setup
    assert [(c.node, c.state) for c in summary.components] == [
        ("ImageExampleGen", "ran"),
        ("StatisticsGen", "ran"),
        ("SchemaGen", "ran"),
        ("ExampleValidator", "ran"),
        ("AnomaliesGate", "ran"),
    ]
    assert all(c.seconds >= 0 for c in summary.components)


def test_rerun_is_cached_and_new_images_are_not(setup):
    config, images, first = setup
    again = run_local(config)
    assert again.run_id != first.run_id
    assert {c.state for c in again.components} == {"cached"}
    (images / "cat" / "0.jpg").write_bytes(image_files.jpeg(seed=999))
    changed = run_local(config)
    assert dict((c.node, c.state) for c in changed.components)["ImageExampleGen"] == "ran"


def test_summary_of_an_empty_store_is_a_clear_error(tmp_path):
    with pytest.raises(LookupError, match="no runs of pipeline 'imgpipe'"):
        summarize_latest_run(open_store(str(tmp_path / "m.db")), "imgpipe")
