"""Which store lineage commands open: flags over environment, each backend's connection config,
and clear errors for ambiguous or malformed settings. Only SQLite is opened here."""

import re

import pytest
from ml_metadata.metadata_store import metadata_store
from ml_metadata.proto import metadata_store_pb2

from data_prep.contract.config_error import ConfigError
from pipeline.mlmd_connection import MlmdTarget, StoreNotFound, resolve_uri

NO_FLAGS = {"sqlite": None, "mysql": None, "grpc": None, "user": None}


def _resolve(environ=None, **flags):
    return MlmdTarget.resolve({**NO_FLAGS, **flags}, environ or {}, default_sqlite="b/m.db")


def test_default_is_the_local_sqlite_store_opened_read_only():
    config = _resolve().connection_config()
    assert config.sqlite.filename_uri == "b/m.db"
    assert config.sqlite.connection_mode == metadata_store_pb2.SqliteMetadataSourceConfig.READONLY


def test_mysql_from_the_environment_with_user_and_password():
    target = _resolve(
        {
            "IMGPIPE_MLMD_MYSQL": "db.internal/mlmd",
            "IMGPIPE_MLMD_USER": "tfx",
            "IMGPIPE_MLMD_PASSWORD": "s3cret",
        }
    )
    config = target.connection_config()
    assert (config.mysql.host, config.mysql.port, config.mysql.database) == (
        "db.internal",
        3306,
        "mlmd",
    )
    assert (config.mysql.user, config.mysql.password) == ("tfx", "s3cret")
    assert "s3cret" not in target.describe()
    assert target.describe() == "MySQL tfx@db.internal/mlmd"


def test_mysql_flag_with_port():
    config = _resolve(mysql="10.0.0.5:3307/metadata").connection_config()
    assert (config.mysql.host, config.mysql.port, config.mysql.database) == (
        "10.0.0.5",
        3307,
        "metadata",
    )


def test_grpc_metadata_service():
    config = _resolve(grpc="metadata-grpc-service:8080").connection_config()
    assert isinstance(config, metadata_store_pb2.MetadataStoreClientConfig)
    assert (config.host, config.port) == ("metadata-grpc-service", 8080)


def test_a_backend_flag_wins_over_the_environment():
    target = _resolve({"IMGPIPE_MLMD_MYSQL": "db/mlmd"}, sqlite="other.db")
    assert target.connection_config().sqlite.filename_uri == "other.db"


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        ({"sqlite": "a.db", "grpc": "h:1"}, "mlmd: name one store, not sqlite and grpc"),
        ({"mysql": "db.internal"}, "mlmd-mysql: 'db.internal' must be host"),
        ({"mysql": "db:port/x"}, "mlmd-mysql: 'db:port' must be host:port with a port"),
        ({"grpc": "metadata"}, "mlmd-grpc: 'metadata' must be host:port"),
        ({"grpc": "h:70000"}, "port between 1 and 65535"),
        ({"user": "tfx"}, "mlmd-user: is only used with a MySQL store"),
    ],
)
def test_bad_settings_name_the_flag(settings, message):
    with pytest.raises(ConfigError, match=message):
        _resolve(**settings).connection_config()


def test_a_missing_sqlite_file_is_a_clear_error_and_is_not_created(tmp_path):
    missing = tmp_path / "nothing.db"
    with pytest.raises(StoreNotFound, match="no ML Metadata store at .*run `imgpipe run` first"):
        _resolve(sqlite=str(missing)).open()
    assert not missing.exists()


def _mlmd_store(path) -> None:
    """An ML Metadata SQLite store with some records, several pages long."""
    config = metadata_store_pb2.ConnectionConfig()
    config.sqlite.filename_uri = str(path)
    store = metadata_store.MetadataStore(config)
    type_id = store.put_artifact_type(metadata_store_pb2.ArtifactType(name="Thing"))
    store.put_artifacts(
        [metadata_store_pb2.Artifact(type_id=type_id, uri=f"/a/{i}" * 50) for i in range(200)]
    )


def _damage(path, how: str) -> None:
    import os
    import sqlite3

    if how == "empty":
        path.write_bytes(b"")
    elif how == "truncated":
        _mlmd_store(path)
        os.truncate(path, os.path.getsize(path) // 2)
    elif how == "not sqlite":
        path.write_bytes(b"just some text, " * 100)
    elif how == "another database":
        sqlite3.connect(path).execute("CREATE TABLE notes (text)").connection.commit()
    elif how == "a pipe":
        os.mkfifo(path)


@pytest.mark.parametrize(
    ("how", "message"),
    [
        ("empty", "is empty (0 bytes), not an ML Metadata store"),
        ("truncated", "is truncated"),
        ("not sqlite", "is not a whole SQLite database"),
        ("another database", "is an SQLite database but not an ML Metadata store"),
        ("a pipe", "a named pipe, not a regular file"),
    ],
)
def test_a_damaged_store_is_named_and_left_as_it_was(tmp_path, how, message):
    import os

    from pipeline.mlmd_connection import StoreDamaged

    path = tmp_path / "metadata.db"
    _damage(path, how)
    before = os.lstat(path)
    with pytest.raises(StoreDamaged, match=re.escape(message)):
        MlmdTarget(sqlite=str(path)).open()
    after = os.lstat(path)
    assert (after.st_size, after.st_mtime_ns) == (before.st_size, before.st_mtime_ns)


def test_a_whole_store_opens(tmp_path):
    _mlmd_store(tmp_path / "metadata.db")
    assert MlmdTarget(sqlite=str(tmp_path / "metadata.db")).open().get_artifact_types()


@pytest.mark.parametrize("command", [["runs"], ["lineage", "model", "--latest-pushed"]])
def test_read_only_commands_on_an_empty_store_say_so_and_never_write_it(tmp_path, capsys, command):
    from pipeline.cli import main

    path = tmp_path / "metadata.db"
    path.write_bytes(b"")
    assert main([*command, "--mlmd-sqlite", str(path)]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"imgpipe {command[0]}: error: {path} is empty (0 bytes)")
    assert len(err.splitlines()) == 1
    assert path.stat().st_size == 0


def test_a_relative_uri_resolves_beside_the_store_it_was_recorded_with(tmp_path):
    store_folder = tmp_path / "project" / "build" / "tfx"
    assert resolve_uri("build/tfx/Trainer/model/5", str(store_folder)) == str(
        store_folder / "Trainer" / "model" / "5"
    )
    assert resolve_uri("/abs/Trainer/model/5", str(store_folder)) == "/abs/Trainer/model/5"
    assert resolve_uri("gs://bucket/model/5", str(store_folder)) == "gs://bucket/model/5"


def test_a_relative_uri_outside_the_store_resolves_where_it_exists(tmp_path):
    store_folder = tmp_path / "project" / "meta"
    (tmp_path / "project" / "artifacts" / "model").mkdir(parents=True)
    assert resolve_uri("artifacts/model", str(store_folder)) == str(
        tmp_path / "project" / "artifacts" / "model"
    )


def test_an_old_store_with_relative_uris_reads_the_same_from_any_folder(tmp_path, monkeypatch):
    """A store written by runs that recorded URIs relative to their working folder."""
    path = tmp_path / "project" / "build" / "tfx" / "metadata.db"
    path.parent.mkdir(parents=True)
    writer = MlmdTarget(sqlite=str(path)).connection_config(read_only=False)
    store = metadata_store.MetadataStore(writer)
    type_id = store.put_artifact_type(metadata_store_pb2.ArtifactType(name="Model"))
    [artifact_id] = store.put_artifacts(
        [metadata_store_pb2.Artifact(type_id=type_id, uri="build/tfx/Trainer/model/5")]
    )
    monkeypatch.chdir(tmp_path)
    reader = MlmdTarget(sqlite=str(path)).open()
    expected = str(path.parent / "Trainer" / "model" / "5")
    assert reader.get_artifacts_by_id([artifact_id])[0].uri == expected
    assert [a.uri for a in reader.get_artifacts_by_type("Model")] == [expected]
    assert [a.uri for a in reader.get_artifacts()] == [expected]
