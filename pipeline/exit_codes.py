"""The exit status of every `imgpipe` command, by kind of outcome: one table, documented in the
README, so scripts and schedulers can tell a refused model from a broken run."""

from __future__ import annotations

OK = 0
COMPONENT_FAILED = 1  # a component (or the command's own work) failed; the log has the traceback
BAD_INPUT = 2  # bad configuration, arguments or input data, found before or during the run
NOT_PUSHED = 3  # the run finished, but the model was not blessed or failed the serving check
GATE_STOPPED = 4  # the data gate stopped the run: anomalies, drift or a class change
BUSY = 5  # another run of the same pipeline holds the metadata store's lock
INTERRUPTED = 130  # Ctrl-C or SIGTERM: the run was stopped and marked as interrupted
