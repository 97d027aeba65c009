"""A Beam cluster on this machine: Beam's Python job service and an external SDK worker pool,
each a separate process on 127.0.0.1, talking the Fn API as Flink, Spark and Dataflow workers do.

`imgpipe run --runner local-cluster` runs every Beam component of the pipeline on it (the
PortableRunner, environment_type=EXTERNAL) to rehearse a distributed runner: DoFns and coders are
pickled, shipped and run in another process. The services live in their own process group, so
stopping them (on success, failure or Ctrl-C) ends the SDK workers the pool started too; they
listen on 127.0.0.1 and end by themselves when this process is gone (cluster_services.py).
Beam's Python job service runs each job on one SDK worker (it ignores direct_num_workers and
sdk_worker_parallelism; docs/scale-out.md names the lines), so the pool serves one worker process
per job. When that worker dies,
the job service waits for it for ever; a watch here cancels such a job, so that the run fails
and says why.
"""

from __future__ import annotations

import contextlib
import dataclasses
import glob
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator

from components.training.local_workers import HOST, free_port
from pipeline.config.beam_options import LOCAL_WORKERS_NEED_NOTHING

SERVICES_MODULE = "pipeline.runners.cluster_services"  # Beam's services, on loopback
START_TIMEOUT_S = 120.0  # each service imports Beam before it listens: slow on a loaded machine
STOP_TIMEOUT_S = 10.0
# Beam 2.59's PortableRunner gives a job's state and message streams the job service's request
# deadline (job_server_timeout, default 60 s): a longer job would fail when the deadline passes.
JOB_DEADLINE_S = 7 * 24 * 3600
WATCH_EVERY_S = 1.0
# A worker that ends normally is stopped by the job service just before its job is marked done;
# a job still running this long after its worker vanished has lost it.
LOST_WORKER_GRACE_S = 15.0


class ClusterError(RuntimeError):
    """A service of the local cluster did not start; the message names its log."""


@dataclasses.dataclass(frozen=True)
class LocalCluster:
    job_port: int
    worker_pool_port: int
    job_service_pid: int
    worker_pool_pid: int

    @property
    def job_endpoint(self) -> str:
        return f"{HOST}:{self.job_port}"

    @property
    def worker_pool_endpoint(self) -> str:
        return f"{HOST}:{self.worker_pool_port}"

    def beam_args(self) -> tuple[str, ...]:
        """The Beam options that send a job to this cluster. The SDK workers run in this
        environment, so TFX need not package itself for them."""
        return (
            "--runner=PortableRunner",
            f"--job_endpoint={self.job_endpoint}",
            "--environment_type=EXTERNAL",
            f"--environment_config={self.worker_pool_endpoint}",
            f"--job_server_timeout={JOB_DEADLINE_S}",
            LOCAL_WORKERS_NEED_NOTHING,
        )

    def worker_pids(self) -> list[int]:
        """The SDK worker processes the pool runs now: its children, less those that have died
        (zombies until the pool reaps them, which it does only when it stops a worker)."""
        return [pid for pid in _children(self.worker_pool_pid) if _alive(pid)]


class _Watch:
    """A thread that watches the services and the SDK workers: when a worker vanishes while its
    job still runs, it cancels the job (the job service never notices the loss) and records why.
    The job service sometimes does notice, and fails the job at once: `explain` then tells a
    job that failed with its worker gone from one that failed on its own."""

    def __init__(self, cluster: LocalCluster, services: dict[str, subprocess.Popen]):
        self.failure: str | None = None
        self._cluster, self._services = cluster, services
        self._workers: set[int] = set()
        self._running: set[str] = set()
        # (vanished worker pids, the jobs that ran then): a job that ends DONE stopped its worker.
        self._vanished: list[tuple[set[int], set[str]]] = []
        self._stopped = threading.Event()
        self._thread = threading.Thread(target=self._watch, name="local-cluster-watch", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stopped.set()
        self._thread.join()

    def explain(self) -> str | None:
        """Why the cluster failed the job that just failed, when a worker's loss explains it."""
        self.stop()
        if self.failure is not None:
            return self.failure
        import grpc

        try:
            with grpc.insecure_channel(self._cluster.job_endpoint) as channel:
                jobs = _Jobs(channel)
                self._sample(jobs)  # a worker lost in the last instant
                states = jobs.states()
        except grpc.RpcError:
            return self.failure
        lost = lost_while_running(self._vanished, states)
        if lost:
            self.failure = _lost_worker_message(lost, "failed")
        return self.failure

    def _watch(self) -> None:
        import grpc

        with grpc.insecure_channel(self._cluster.job_endpoint) as channel:
            jobs = _Jobs(channel)
            while self.failure is None and not self._stopped.wait(WATCH_EVERY_S):
                for name, process in self._services.items():
                    if process.poll() is not None:
                        self.failure = f"the Beam {name} exited ({process.returncode})"
                if self.failure:
                    break
                try:
                    lost = self._sample(jobs)
                    if lost:
                        self._cancel_orphans(jobs, lost)
                except grpc.RpcError:
                    # The job service went away: the services' check above says so next time.
                    continue

    def _sample(self, jobs: _Jobs) -> set[int]:
        """Notes the workers and running jobs now; returns the workers lost since last time."""
        now, running = set(self._cluster.worker_pids()), jobs.running()
        lost, self._workers = self._workers - now, now
        if lost:
            self._vanished.append((lost, self._running | running))
        self._running = running
        return lost

    def _cancel_orphans(self, jobs: _Jobs, lost: set[int]) -> None:
        suspects = jobs.running()
        if not suspects or self._stopped.wait(LOST_WORKER_GRACE_S):
            return
        for job_id in suspects & jobs.running():
            jobs.cancel(job_id)
            self.failure = _lost_worker_message(lost, "cancelled")


class _Jobs:
    """The job service's view of its jobs."""

    def __init__(self, channel):
        from apache_beam.portability.api import beam_job_api_pb2_grpc

        self._stub = beam_job_api_pb2_grpc.JobServiceStub(channel)

    def states(self) -> dict[str, int]:
        from apache_beam.portability.api import beam_job_api_pb2

        answer = self._stub.GetJobs(beam_job_api_pb2.GetJobsRequest(), timeout=30)
        return {job.job_id: job.state for job in answer.job_info}

    def running(self) -> set[str]:
        from apache_beam.portability.api import beam_job_api_pb2

        return {
            job_id
            for job_id, state in self.states().items()
            if state == beam_job_api_pb2.JobState.RUNNING
        }

    def cancel(self, job_id: str) -> None:
        from apache_beam.portability.api import beam_job_api_pb2

        self._stub.Cancel(beam_job_api_pb2.CancelJobRequest(job_id=job_id), timeout=30)


def lost_while_running(
    vanished: list[tuple[set[int], set[str]]], states: dict[str, int]
) -> set[int]:
    """The workers that vanished while a job ran that then did not finish DONE: a worker that
    ends normally is stopped just before its job is marked done."""
    from apache_beam.portability.api import beam_job_api_pb2

    done = beam_job_api_pb2.JobState.DONE
    lost: set[int] = set()
    for workers, jobs in vanished:
        if any(states.get(job_id, done) != done for job_id in jobs):
            lost |= workers
    return lost


def _lost_worker_message(lost: set[int], outcome: str) -> str:
    return (
        f"an SDK worker of the local Beam cluster (pid {', '.join(map(str, sorted(lost)))}) "
        f"died while its job ran; the job was {outcome}"
    )


@contextlib.contextmanager
def local_cluster(
    log_dir: str, job_port: int = 0, worker_pool_port: int = 0
) -> Iterator[LocalCluster]:
    """Starts the job service and the worker pool (on free ports where a port is 0), waits until
    both listen, yields the cluster, and stops both whatever happens. Their output goes to
    job-service.log and worker-pool.log under log_dir."""
    os.makedirs(log_dir, exist_ok=True)
    job_port = job_port or free_port()
    worker_pool_port = worker_pool_port or free_port()
    # The pool starts each SDK worker as `python` from PATH: this environment's interpreter.
    env = {
        **os.environ,
        "PATH": os.path.dirname(sys.executable) + os.pathsep + os.environ.get("PATH", ""),
    }
    services = (("job-service", job_port), ("worker-pool", worker_pool_port))
    started: list[subprocess.Popen] = []
    try:
        # Both start at once: each spends seconds importing Beam before it listens.
        for name, port in services:
            with open(os.path.join(log_dir, f"{name}.log"), "ab") as log:
                started.append(
                    subprocess.Popen(
                        [sys.executable, "-m", SERVICES_MODULE, name, str(port), str(os.getpid())],
                        stdin=subprocess.DEVNULL,
                        stdout=log,
                        stderr=subprocess.STDOUT,
                        env=env,
                        start_new_session=True,  # Ctrl-C reaches us, not them: we stop them
                    )
                )
        for process, (name, port) in zip(started, services, strict=True):
            _wait_listening(process, port, name, os.path.join(log_dir, f"{name}.log"))
        job_service, worker_pool = started
        cluster = LocalCluster(job_port, worker_pool_port, job_service.pid, worker_pool.pid)
        watch = _Watch(cluster, dict(zip([name for name, _ in services], started, strict=True)))
        watch.start()
        try:
            yield cluster
        except BaseException as error:
            failure = watch.explain()
            if failure is None:
                raise
            raise ClusterError(f"{failure}; see {log_dir}") from error
        finally:
            watch.stop()
    finally:
        for process in reversed(started):
            _stop(process)


def _wait_listening(process: subprocess.Popen, port: int, name: str, log_path: str) -> None:
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise ClusterError(
                f"the Beam {name} exited at start ({process.returncode}); see {log_path}"
            )
        with socket.socket() as probe:
            if probe.connect_ex((HOST, port)) == 0:
                return
        time.sleep(0.2)
    raise ClusterError(
        f"the Beam {name} did not listen on port {port} in {START_TIMEOUT_S:.0f} s; see {log_path}"
    )


def _stop(process: subprocess.Popen) -> None:
    """SIGTERM to the service's process group (its SDK workers included), SIGKILL if it lingers."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, sig)
        try:
            process.wait(STOP_TIMEOUT_S)
            break
        except subprocess.TimeoutExpired:
            continue
    # The group may outlive its leader (an SDK worker ignoring SIGTERM).
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGKILL)


def _alive(pid: int) -> bool:
    """Linux: whether `pid` runs (a zombie does not)."""
    try:
        with open(f"/proc/{pid}/stat") as handle:
            # The state follows the command's closing parenthesis.
            return handle.read().rpartition(")")[2].split()[0] != "Z"
    except (OSError, IndexError):
        return False


def _children(pid: int) -> list[int]:
    """Linux: the children of `pid`, started by any of its threads (none where /proc is absent)."""
    children = []
    for task in glob.glob(f"/proc/{pid}/task/*/children"):
        with contextlib.suppress(OSError), open(task) as handle:
            children += [int(child) for child in handle.read().split()]
    return sorted(children)
