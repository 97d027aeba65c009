"""Which ML Metadata store to read: the local SQLite file by default, or the store a production
deployment uses (MySQL, or a gRPC metadata service as on Kubeflow/Vertex), from flags or
IMGPIPE_MLMD_* environment variables. Flags win over the environment.

Only ml_metadata is imported here (no TensorFlow), so lineage commands start in a fraction of a
second.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Mapping

from ml_metadata.metadata_store import metadata_store
from ml_metadata.proto import metadata_store_pb2

from data_prep.contract.config_error import ConfigError
from data_prep.reading.files import open_regular

ENV_PREFIX = "IMGPIPE_MLMD_"
BACKENDS = ("sqlite", "mysql", "grpc")
DEFAULT_MYSQL_PORT = 3306
_MLMD_TABLE = "MLMDEnv"  # ML Metadata's schema version, in every store it made


def metadata_path_under(build_dir: str) -> str:
    """The local SQLite store of a build folder (runs write it, queries read it by default)."""
    return os.path.join(build_dir, "tfx", "metadata.db")


class StoreNotFound(LookupError):
    """The SQLite file does not exist: nothing has run yet, or the path is wrong."""


class StoreDamaged(StoreNotFound):
    """The SQLite file is no whole ML Metadata store: empty, truncated, or some other file."""


def check_sqlite_store(path: str) -> None:
    """Raises StoreNotFound when there is no file at path, StoreDamaged when it is no whole ML
    Metadata store. Reads it through SQLite's read-only mode (never ML Metadata's, which writes
    its schema into an empty file): a damaged store is named, and never written."""
    import contextlib
    import sqlite3
    import urllib.parse

    if not os.path.exists(path):
        raise StoreNotFound(
            f"no ML Metadata store at {path}: run `imgpipe run` first, or name your store with "
            f"--mlmd-sqlite/--mlmd-mysql/--mlmd-grpc (or {ENV_PREFIX}SQLITE/MYSQL/GRPC)"
        )
    advice = "restore it from a copy, or move it away to start a new store"
    try:
        with open_regular(path) as handle:
            header = handle.read(100)
    except OSError as error:
        raise StoreDamaged(f"{path} cannot be read as a store: {error}") from error
    if not header:
        raise StoreDamaged(f"{path} is empty (0 bytes), not an ML Metadata store: {advice}")
    pages = _pages_in_header(header)
    if pages is not None and os.path.getsize(path) < pages[0] * pages[1]:
        raise StoreDamaged(
            f"{path} is truncated ({os.path.getsize(path)} of {pages[0] * pages[1]} bytes): "
            f"{advice}"
        )
    uri = f"file:{urllib.parse.quote(os.path.abspath(path))}?mode=ro"
    try:
        with contextlib.closing(sqlite3.connect(uri, uri=True, timeout=30)) as database:
            tables = {
                row[0]
                for row in database.execute("SELECT name FROM sqlite_master WHERE type='table'")
            }
    except sqlite3.OperationalError as error:
        if "locked" in str(error):  # a run is writing it: a busy store is not a damaged one
            return
        raise StoreDamaged(f"{path} cannot be read as SQLite ({error}): {advice}") from error
    except sqlite3.DatabaseError as error:
        raise StoreDamaged(f"{path} is not a whole SQLite database ({error}): {advice}") from error
    if _MLMD_TABLE not in tables:
        raise StoreDamaged(f"{path} is an SQLite database but not an ML Metadata store")


@dataclasses.dataclass(frozen=True)
class MlmdTarget:
    """Where ML Metadata lives. At most one of sqlite, mysql, grpc; none means default_sqlite.

    Attributes:
      sqlite: path of a SQLite store.
      mysql: host[:port]/database of a MySQL store (port 3306 when omitted).
      grpc: host:port of a metadata gRPC service.
      user, password: MySQL credentials (password from IMGPIPE_MLMD_PASSWORD, never a flag, so
        it stays out of shell history and process lists).
      default_sqlite: the local store used when no backend is named.
    """

    sqlite: str | None = None
    mysql: str | None = None
    grpc: str | None = None
    user: str | None = None
    password: str | None = None
    default_sqlite: str = metadata_path_under("build")

    @classmethod
    def resolve(
        cls, flags: Mapping[str, str | None], environ: Mapping[str, str] = os.environ, **defaults
    ) -> MlmdTarget:
        """Flags (sqlite, mysql, grpc, user) first; the environment only when no backend flag
        is given, so `--mlmd-sqlite X` works in a shell where IMGPIPE_MLMD_MYSQL is set."""
        use_flags = any(flags.get(backend) for backend in BACKENDS)
        values = {}
        for field in (*BACKENDS, "user"):
            from_env = None if use_flags and field in BACKENDS else environ.get(_env(field))
            values[field] = flags.get(field) or from_env or None
        values["password"] = environ.get(_env("password"))
        return cls(**values, **defaults)

    def backend(self) -> str:
        named = [backend for backend in BACKENDS if getattr(self, backend)]
        if len(named) > 1:
            raise ConfigError("mlmd", f"name one store, not {' and '.join(named)}")
        if self.user and named != ["mysql"]:
            raise ConfigError("mlmd-user", "is only used with a MySQL store (--mlmd-mysql)")
        return named[0] if named else "sqlite"

    def connection_config(
        self, read_only: bool = True
    ) -> metadata_store_pb2.ConnectionConfig | metadata_store_pb2.MetadataStoreClientConfig:
        """read_only=False for a pipeline run, which writes the store (and may create a SQLite
        file); queries never change it."""
        backend = self.backend()
        if backend == "grpc":
            host, port = _host_port(self.grpc, "mlmd-grpc", default_port=None)
            return metadata_store_pb2.MetadataStoreClientConfig(host=host, port=port)
        config = metadata_store_pb2.ConnectionConfig()
        if backend == "mysql":
            address, _, database = self.mysql.partition("/")
            if not database:
                raise ConfigError("mlmd-mysql", f"{self.mysql!r} must be host[:port]/database")
            host, port = _host_port(address, "mlmd-mysql", default_port=DEFAULT_MYSQL_PORT)
            config.mysql.host, config.mysql.port, config.mysql.database = host, port, database
            if self.user:
                config.mysql.user = self.user
            if self.password:
                config.mysql.password = self.password
            return config
        config.sqlite.filename_uri = self.sqlite or self.default_sqlite
        config.sqlite.connection_mode = (
            metadata_store_pb2.SqliteMetadataSourceConfig.READONLY
            if read_only
            else metadata_store_pb2.SqliteMetadataSourceConfig.READWRITE_OPENCREATE
        )
        return config

    def describe(self) -> str:
        """The store in words, for messages (never the password)."""
        backend = self.backend()
        if backend == "grpc":
            return f"metadata service {self.grpc}"
        if backend == "mysql":
            return f"MySQL {self.user + '@' if self.user else ''}{self.mysql}"
        return f"SQLite {self.sqlite or self.default_sqlite}"

    def open(self) -> metadata_store.MetadataStore:
        """A read-only store for SQLite (a query never creates or changes a file), whose
        artifact URIs read the same from any folder (see PortableStore); raises StoreNotFound
        or StoreDamaged when the SQLite file is missing or no whole store."""
        config = self.connection_config()
        if isinstance(config, metadata_store_pb2.ConnectionConfig) and config.HasField("sqlite"):
            check_sqlite_store(config.sqlite.filename_uri)
            return PortableStore(config)
        return metadata_store.MetadataStore(config)


def resolve_uri(uri: str, store_folder: str) -> str:
    """An artifact URI as a path that reads the same from any folder. Runs record absolute
    URIs; a store written before recorded them relative to the run's working folder, which is
    the ancestor of the store's folder that puts the URI beside the store (the default layout
    keeps the store in the pipeline root: `build/tfx/Trainer/model/5` next to
    `<folder>/build/tfx/metadata.db`). Failing that, the nearest ancestor where the path
    exists, else the store's own folder."""
    if not uri or "://" in uri or os.path.isabs(uri):
        return uri
    store_folder = os.path.abspath(store_folder)
    ancestors = [store_folder]
    while os.path.dirname(ancestors[-1]) != ancestors[-1]:
        ancestors.append(os.path.dirname(ancestors[-1]))
    candidates = [os.path.normpath(os.path.join(folder, uri)) for folder in ancestors]
    # From a strict ancestor, farthest first: `build/tfx/...` is beside
    # <folder>/build/tfx/metadata.db from <folder>, not from <folder>/build/tfx.
    beside = [path for path in candidates[:0:-1] if path.startswith(store_folder + os.sep)]
    existing = [path for path in candidates if os.path.exists(path)]
    return (beside or existing or candidates)[0]


class PortableStore(metadata_store.MetadataStore):
    """A local SQLite store whose artifacts come back with their URIs resolved (resolve_uri),
    so a store written with relative URIs answers the same from any folder."""

    def __init__(self, config: metadata_store_pb2.ConnectionConfig):
        super().__init__(config)
        self._folder = os.path.dirname(os.path.abspath(config.sqlite.filename_uri))

    def _resolved(self, artifacts):
        for artifact in artifacts:
            artifact.uri = resolve_uri(artifact.uri, self._folder)
        return artifacts

    def get_artifacts(self, *args, **kwargs):
        return self._resolved(super().get_artifacts(*args, **kwargs))

    def get_artifacts_by_id(self, *args, **kwargs):
        return self._resolved(super().get_artifacts_by_id(*args, **kwargs))

    def get_artifacts_by_type(self, *args, **kwargs):
        return self._resolved(super().get_artifacts_by_type(*args, **kwargs))

    def get_artifacts_by_context(self, *args, **kwargs):
        return self._resolved(super().get_artifacts_by_context(*args, **kwargs))

    def get_artifacts_by_external_ids(self, *args, **kwargs):
        return self._resolved(super().get_artifacts_by_external_ids(*args, **kwargs))

    def get_artifact_by_type_and_name(self, *args, **kwargs):
        found = super().get_artifact_by_type_and_name(*args, **kwargs)
        return self._resolved([found])[0] if found is not None else None

    def get_artifacts_and_types_by_artifact_ids(self, *args, **kwargs):
        artifacts, types = super().get_artifacts_and_types_by_artifact_ids(*args, **kwargs)
        return self._resolved(artifacts), types


def _pages_in_header(header: bytes) -> tuple[int, int] | None:
    """(page count, page size) from an SQLite file's header, when the header vouches for the
    count (its change counter matches the version-valid-for number); None otherwise."""
    if len(header) < 100 or not header.startswith(b"SQLite format 3\x00"):
        return None
    page_size = int.from_bytes(header[16:18], "big")
    page_size = 65536 if page_size == 1 else page_size
    pages = int.from_bytes(header[28:32], "big")
    if pages == 0 or header[24:28] != header[92:96]:
        return None
    return pages, page_size


def _env(field: str) -> str:
    return ENV_PREFIX + field.upper()


def _host_port(text: str, field: str, default_port: int | None) -> tuple[str, int]:
    host, colon, port = text.rpartition(":") if ":" in text else (text, "", "")
    if not colon:
        if default_port is None:
            raise ConfigError(field, f"{text!r} must be host:port")
        return host, default_port
    if not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise ConfigError(field, f"{text!r} must be host:port with a port between 1 and 65535")
    return host, int(port)
