"""A rollback pins a whole version in the serving folder: readers and a running server's watcher
serve it, a later push does not take over while the pin stands (and the run says so), and a
version that is not whole is refused."""

import types

import pytest
from ml_metadata.metadata_store import metadata_store
from ml_metadata.proto import metadata_store_pb2 as mlmd_pb2

from components import metadata_keys
from components.serving.versions import served_version
from pipeline.serving import rollback
from tests.components.serving.test_versions import _version

OLD, NEW = 1700000000, 1800000000


@pytest.fixture
def base(tmp_path):
    base = tmp_path / "serving" / "imgpipe"
    _version(base, str(OLD))
    _version(base, str(NEW))
    return base


def test_a_rollback_pins_a_whole_version_and_latest_removes_the_pin(base):
    assert rollback.roll_back(str(base), str(OLD)).startswith(f"version {OLD} of ")
    assert served_version(base) == OLD
    rows = rollback.list_versions(str(base))
    assert [(r.name, r.state, r.pinned) for r in rows] == [
        (str(NEW), "kept", False),
        (str(OLD), "serving", True),
    ]
    assert rollback.pinned_note(str(base)) == (
        f"rolled back to {OLD}: version {NEW} pushed but not served; "
        "imgpipe models rollback --latest to serve it"
    )
    assert rollback.roll_back(str(base), None).startswith(f"version {NEW} of ")
    assert served_version(base) == NEW
    assert rollback.pinned_note(str(base)) is None


def test_a_version_that_is_not_whole_is_refused(base):
    _version(base, "1900000000", whole=False)
    (base / f"{OLD}").rename(base / f"{OLD}.broken")
    for refused in ("1900000000", str(OLD), "1234", "latest"):
        with pytest.raises(rollback.RollbackError):
            rollback.roll_back(str(base), refused)
    with pytest.raises(rollback.RollbackError, match="not a serving folder"):
        rollback.roll_back(str(base.parent / "missing"), None)
    assert served_version(base) == NEW
    states = {r.name: r.state for r in rollback.list_versions(str(base))}
    aside = f"{OLD}.broken"
    assert states == {"1900000000": "incomplete", str(NEW): "serving", aside: "moved aside"}


def test_a_running_servers_watcher_switches_to_the_pinned_version(base):
    from pipeline.serving.server import VersionWatcher

    said = []
    servable = lambda version, folder: types.SimpleNamespace(version=version, load_seconds=0.1)  # noqa: E731
    watcher = VersionWatcher("imgpipe", str(base), servable(NEW, ""), said.append, servable)
    rollback.roll_back(str(base), str(OLD))
    watcher.poll()
    assert watcher.current.version == OLD
    assert said == [
        f"version {OLD} serves now (loaded and warmed up in 0.1 s), in place of version {NEW}"
    ]
    rollback.roll_back(str(base), None)
    watcher.poll()
    assert watcher.current.version == NEW


def test_a_rollback_is_recorded_in_ml_metadata(tmp_path):
    config = mlmd_pb2.ConnectionConfig()
    config.sqlite.filename_uri = str(tmp_path / "metadata.db")
    store = metadata_store.MetadataStore(config)
    rollback.record_rollback(store, str(tmp_path / "serving"), OLD)
    rollback.record_rollback(store, str(tmp_path / "serving"), None)
    recorded = store.get_executions_by_type(metadata_keys.ROLLBACK_EXECUTION_TYPE)
    pins = [e.custom_properties[metadata_keys.PINNED_VERSION_PROPERTY].int_value for e in recorded]
    assert pins == [OLD, 0]
    folder = recorded[0].custom_properties[metadata_keys.SERVING_FOLDER_PROPERTY].string_value
    assert folder == str(tmp_path / "serving")
