"""`imgpipe ui` and `imgpipe report` without a store to read, and their help."""

import pytest

from pipeline.cli import build_parser, main


def test_ui_and_report_without_a_store_say_where_they_looked(tmp_path, capsys):
    missing = str(tmp_path / "none.db")
    assert main(["ui", "--mlmd-sqlite", missing]) == 2
    assert capsys.readouterr().err.startswith(
        f"imgpipe ui: error: no ML Metadata store at {missing}"
    )
    assert (
        main(["report", "latest", "--output", str(tmp_path / "r.html"), "--mlmd-sqlite", missing])
        == 2
    )
    assert "imgpipe report: error: no ML Metadata store" in capsys.readouterr().err


@pytest.mark.parametrize("command", [["ui"], ["report"]])
def test_each_command_has_help(command, capsys):
    with pytest.raises(SystemExit) as exit_info:
        build_parser().parse_args([*command, "--help"])
    assert exit_info.value.code == 0
    assert "--mlmd-sqlite" in capsys.readouterr().out


def test_ui_on_a_port_in_use_is_one_error_line(tmp_path, capsys):
    import socket

    from ml_metadata.metadata_store import metadata_store
    from ml_metadata.proto import metadata_store_pb2

    store = tmp_path / "metadata.db"
    config = metadata_store_pb2.ConnectionConfig()
    config.sqlite.filename_uri = str(store)
    metadata_store.MetadataStore(config)  # an empty store: the port is what fails
    with socket.create_server(("127.0.0.1", 0)) as taken:
        port = taken.getsockname()[1]
        assert main(["ui", "--mlmd-sqlite", str(store), "--port", str(port)]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"imgpipe ui: error: cannot listen on 127.0.0.1:{port}: ")
    assert len(err.strip().splitlines()) == 1


def test_ui_on_a_port_beyond_65535_is_one_error_line(tmp_path, capsys):
    assert main(["ui", "--mlmd-sqlite", str(tmp_path / "none.db"), "--port", "99999"]) == 2
    err = capsys.readouterr().err
    assert err == "imgpipe ui: error: --port 99999 is not a port (0 to 65535)\n"
