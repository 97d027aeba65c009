"""Which lost SDK workers explain a failed job: a worker stopped because its job finished is no
loss, one that vanished while its job ran and the job then failed or was cancelled is. The
services listen on loopback only and end with the run, even one killed with SIGKILL."""

import subprocess
import sys
import time

import pytest
from apache_beam.portability.api import beam_job_api_pb2

from pipeline.runners import local_cluster
from pipeline.runners.local_cluster import lost_while_running

State = beam_job_api_pb2.JobState


def test_a_worker_stopped_at_the_end_of_a_done_job_is_no_loss():
    assert lost_while_running([({11}, {"job-1"})], {"job-1": State.DONE}) == set()


def test_a_worker_gone_while_its_job_ran_explains_the_job_failing():
    vanished = [({11}, {"job-1"}), ({12}, {"job-2"})]
    states = {"job-1": State.DONE, "job-2": State.FAILED}
    assert lost_while_running(vanished, states) == {12}


def test_a_cancelled_or_still_running_job_counts_as_not_done():
    vanished = [({11}, {"job-1"}), ({12}, {"job-2"})]
    states = {"job-1": State.CANCELLED, "job-2": State.RUNNING}
    assert lost_while_running(vanished, states) == {11, 12}


def test_a_worker_gone_between_jobs_is_no_loss():
    assert lost_while_running([({11}, set())], {"job-1": State.FAILED}) == set()


def _listening(pid: int) -> list[str]:
    """The local addresses process pid listens on, as `ss -ltnp` shows them."""
    table = subprocess.run(["ss", "-ltnpH"], capture_output=True, text=True, check=True).stdout
    return [line.split()[3] for line in table.splitlines() if f"pid={pid}," in line]


@pytest.mark.slow
def test_the_services_listen_on_loopback_and_end_when_the_run_is_killed(tmp_path):
    code = (
        "import sys, time\n"
        "from pipeline.runners.local_cluster import local_cluster\n"
        "with local_cluster(sys.argv[1]) as cluster:\n"
        "    print(cluster.job_service_pid, cluster.worker_pool_pid, flush=True)\n"
        "    time.sleep(600)\n"
    )
    run = subprocess.Popen(
        [sys.executable, "-c", code, str(tmp_path)], stdout=subprocess.PIPE, text=True
    )
    try:
        pids = [int(pid) for pid in run.stdout.readline().split()]
        assert len(pids) == 2
        for pid in pids:
            addresses = _listening(pid)
            hosts = {address.rpartition(":")[0] for address in addresses}
            assert hosts and hosts <= {"127.0.0.1", "[::ffff:127.0.0.1]"}, addresses
    finally:
        run.kill()  # as kill -9 would: nothing of the run gets to clean up
        run.wait()
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and any(local_cluster._alive(pid) for pid in pids):
        time.sleep(0.2)
    assert not any(local_cluster._alive(pid) for pid in pids)
