"""A failed command's exit status (from pipeline/exit_codes.py) and its one
`imgpipe <command>: error: ...` line."""

from __future__ import annotations

import sys

from data_prep.runtime.terminal import terminal_safe
from pipeline import exit_codes


def describe_failure(error: BaseException, where: str | None) -> tuple[int, str]:
    """The exit status and error line of work that raised `error` while `where` (a component,
    or None) ran; the traceback is in the log."""
    code = exit_codes.of_error(error)
    place = f"{where}: " if where else ""
    if code == exit_codes.INTERRUPTED:
        return code, f"interrupted{' in ' + where if where else ''}"
    if code == exit_codes.BUSY:
        return code, f"{error}; leave out --no-wait to wait for it"
    if code == exit_codes.BAD_INPUT:
        return code, f"{place}{error}"
    from pipeline.run_guard import error_line

    return code, f"{place}{error_line(error)}"


def report_failure(command: str, failure: tuple[int, str], log_path: str) -> int:
    code, message = failure
    line = f"imgpipe {command}: error: {message} (full log: {log_path})"
    print(terminal_safe(line), file=sys.stderr)
    return code
