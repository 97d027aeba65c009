"""One service of the local Beam cluster, run as a child process: `python -m
pipeline.runners.cluster_services job-service|worker-pool PORT PARENT_PID`.

Beam 2.59's own mains bind the worker pool to every interface ('[::]'), and the pool runs
whatever a client sends it; here both services listen on 127.0.0.1 only: the job service
through the address LocalJobServicer documents as the one to override, the worker pool through
a server made here around Beam's servicer. A thread watches the parent: once it is gone
(whatever ended it, SIGKILL too), the service's process group, with the SDK workers the pool
started, ends. Beam opens each job's own control, data, state and logging ports on every
interface, with no option to choose (fn_api_runner/worker_handlers.py).
"""

from __future__ import annotations

import logging
import os
import signal
import sys
import threading
import time

import grpc
from apache_beam.portability.api import beam_fn_api_pb2_grpc
from apache_beam.runners.portability import local_job_service
from apache_beam.runners.worker import worker_pool_main
from apache_beam.utils import thread_pool_executor

from components.training.local_workers import HOST

PARENT_CHECK_EVERY_S = 0.5
# As Beam's worker pool main sets them: idle SDK workers keep their connection.
_GRPC_OPTIONS = [("grpc.http2.max_pings_without_data", 0), ("grpc.http2.max_ping_strikes", 0)]


class LoopbackJobServicer(local_job_service.LocalJobServicer):
    """Beam's job service, bound and announced (artifact staging) on 127.0.0.1."""

    def get_service_address(self) -> str:
        return HOST


def start_job_service(port: int) -> LoopbackJobServicer:
    servicer = LoopbackJobServicer()
    servicer.start_grpc_server(port)
    return servicer


def start_worker_pool(port: int) -> grpc.Server:
    server = grpc.server(thread_pool_executor.shared_unbounded_instance(), options=_GRPC_OPTIONS)
    if server.add_insecure_port(f"{HOST}:{port}") == 0:
        raise OSError(f"the worker pool cannot listen on {HOST}:{port}")
    pool = worker_pool_main.BeamFnExternalWorkerPoolServicer(use_process=True)
    beam_fn_api_pb2_grpc.add_BeamFnExternalWorkerPoolServicer_to_server(pool, server)
    server.start()
    return server


def end_with_parent(parent_pid: int) -> None:
    """Ends this process group as soon as parent_pid is no longer this process's parent."""

    def watch() -> None:
        while os.getppid() == parent_pid:
            time.sleep(PARENT_CHECK_EVERY_S)
        os.killpg(0, signal.SIGKILL)

    threading.Thread(target=watch, name="end-with-parent", daemon=True).start()


def main(argv: list[str]) -> None:
    kind, port, parent_pid = argv[0], int(argv[1]), int(argv[2])
    logging.basicConfig(level=logging.INFO)
    end_with_parent(parent_pid)
    # Held until the process ends: a gRPC server that is garbage-collected stops serving.
    service = start_job_service(port) if kind == "job-service" else start_worker_pool(port)
    logging.getLogger(__name__).info("%s listening on %s:%d", kind, HOST, port)
    threading.Event().wait()
    del service


if __name__ == "__main__":
    main(sys.argv[1:])
