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
