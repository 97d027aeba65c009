"""A real MariaDB/MySQL server for tests: started on 127.0.0.1 in a temporary folder, with one
database and user, and stopped afterwards. The server comes from the system's package manager
(`.ci/run` installs mariadb-server); without it the tests that need it are skipped."""

from __future__ import annotations

import contextlib
import dataclasses
import shutil
import socket
import subprocess
import time

DATABASE, USER, PASSWORD = "imgpipe", "imgpipe", "imgpipe-test"


@dataclasses.dataclass(frozen=True)
class MysqlServer:
    host: str
    port: int
    database: str
    user: str
    password: str

    @property
    def address(self) -> str:
        """host:port/database, as `--mlmd-mysql` takes it."""
        return f"{self.host}:{self.port}/{self.database}"


def server_binaries() -> tuple[str, str, str] | None:
    """(installer, server, client) of MariaDB, or None when it is not installed."""
    found = tuple(shutil.which(name) for name in ("mariadb-install-db", "mariadbd", "mariadb"))
    return found if all(found) else None


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@contextlib.contextmanager
def mysql_server(root) -> MysqlServer:
    installer, server, client = server_binaries()
    data, sock, port = root / "data", root / "mysqld.sock", _free_port()
    subprocess.run(
        [installer, "--no-defaults", f"--datadir={data}", "--user=root",
         "--auth-root-authentication-method=socket", "--skip-test-db"],
        check=True, capture_output=True, timeout=300,
    )  # fmt: skip
    process = subprocess.Popen(
        [server, "--no-defaults", f"--datadir={data}", f"--socket={sock}", f"--port={port}",
         "--bind-address=127.0.0.1", "--user=root", f"--log-error={root / 'server.log'}"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        setup = (
            f"CREATE DATABASE {DATABASE}; "
            f"CREATE USER '{USER}'@'127.0.0.1' IDENTIFIED BY '{PASSWORD}'; "
            f"GRANT ALL ON {DATABASE}.* TO '{USER}'@'127.0.0.1';"
        )
        for _ in range(120):
            done = subprocess.run(
                [client, "--no-defaults", f"--socket={sock}", "-uroot", "-e", setup],
                capture_output=True, timeout=60,
            )  # fmt: skip
            if done.returncode == 0:
                break
            if process.poll() is not None:
                raise RuntimeError(f"MariaDB did not start; see {root / 'server.log'}")
            time.sleep(0.5)
        else:
            raise RuntimeError(f"MariaDB did not accept connections; see {root / 'server.log'}")
        yield MysqlServer("127.0.0.1", port, DATABASE, USER, PASSWORD)
    finally:
        process.terminate()
        process.wait(timeout=120)
