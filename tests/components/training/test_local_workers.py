"""Local worker processes: each gets the same arguments and its own TF_CONFIG task in one
cluster; one failing stops the others and names itself; their progress reaches the caller's log
records; they stop when their caller is killed."""

import json
import logging
import os
import signal
import subprocess
import sys
import time

import pytest

from components.training import local_workers
from data_prep.runtime import progress


def record_task(arguments: str) -> None:
    """An entry point: writes this worker's TF_CONFIG into the folder `arguments` names."""
    tf_config = json.loads(os.environ["TF_CONFIG"])
    path = os.path.join(arguments, f"worker{tf_config['task']['index']}.json")
    with open(path, "w") as handle:
        json.dump(tf_config, handle)


def fail_second(arguments: str) -> None:
    """An entry point: worker 1 fails with a message; the others wait for ever, as a worker
    waits for a dead peer's collective."""
    if json.loads(os.environ["TF_CONFIG"])["task"]["index"] == 1:
        raise SystemExit(f"worker 1 gave up on {arguments}")
    while True:
        time.sleep(1)


def report_progress(arguments: str) -> None:
    """An entry point: the chief reports progress; every worker prints a line of its own."""
    index = json.loads(os.environ["TF_CONFIG"])["task"]["index"]
    if index == 0:
        progress.report(logging.getLogger("trainer"), "training", done=1, total=2, seconds=0.5)
    print(f"worker {index} says {arguments}", file=sys.stderr, flush=True)


def wait_for_ever(arguments: str) -> None:
    """An entry point: notes this worker's pid in the folder `arguments` names, then waits."""
    with open(os.path.join(arguments, f"{os.getpid()}.pid"), "w"):
        pass
    while True:
        time.sleep(1)


def test_every_worker_runs_with_its_own_task_in_one_cluster(tmp_path):
    local_workers.run_workers(3, f"{__name__}:record_task", str(tmp_path))

    configs = [json.loads((tmp_path / f"worker{i}.json").read_text()) for i in range(3)]
    [cluster] = {json.dumps(config["cluster"]) for config in configs}
    addresses = json.loads(cluster)["worker"]
    assert len(set(addresses)) == 3
    assert all(address.startswith(f"{local_workers.HOST}:") for address in addresses)
    assert [config["task"] for config in configs] == [
        {"type": "worker", "index": index} for index in range(3)
    ]


def test_a_failed_worker_stops_the_others_and_says_which(tmp_path):
    # Were the waiting worker not stopped, run_workers would never return.
    with pytest.raises(RuntimeError, match=r"training worker 1 of 2 exited 1: worker 1 gave up on"):
        local_workers.run_workers(2, f"{__name__}:fail_second", str(tmp_path))


def test_the_chief_s_progress_becomes_a_log_record_and_other_output_goes_to_stderr(caplog, capsys):
    with caplog.at_level(logging.INFO, logger=local_workers.__name__):
        local_workers.run_workers(2, f"{__name__}:report_progress", "hello")

    forwarded = [r.getMessage() for r in caplog.records if r.name == local_workers.__name__]
    [event] = [progress.parse(message) for message in forwarded]
    assert event.task == "training" and event.fields["done"] == 1
    printed = capsys.readouterr().err
    assert "worker 0 says hello" in printed and "worker 1 says hello" in printed
    assert "progress training" not in printed


_CALLER = """
import sys
from components.training import local_workers
ENTRY = "tests.components.training.test_local_workers:wait_for_ever"
local_workers.run_workers(2, ENTRY, sys.argv[1])
"""


def test_workers_stop_when_their_caller_is_killed(tmp_path):
    # Imported here, not by the workers, which import this module: it imports Beam.
    from pipeline.runners.local_cluster import _alive

    caller = subprocess.Popen([sys.executable, "-c", _CALLER, str(tmp_path)])
    deadline = time.monotonic() + 120
    while len(list(tmp_path.glob("*.pid"))) < 2 and time.monotonic() < deadline:
        time.sleep(0.1)
    workers = [int(path.stem) for path in tmp_path.glob("*.pid")]
    assert len(workers) == 2

    caller.send_signal(signal.SIGKILL)
    caller.wait()
    while any(_alive(pid) for pid in workers) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not any(_alive(pid) for pid in workers)
