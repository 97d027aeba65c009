"""Local worker processes: each gets the same arguments and its own TF_CONFIG task in one
cluster; one failing stops the others and names itself."""

import json
import os
import time

import pytest

from components.trainer import local_workers


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
