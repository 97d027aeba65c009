"""`imgpipe run`: the pipeline on this machine, then the run's summary."""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import os
import sys

from data_prep.contract.config_error import ConfigError
from data_prep.runtime.terminal import terminal_safe
from pipeline import console, exit_codes, interrupts
from pipeline.cli import options
from pipeline.cli.failures import describe_failure, report_failure

LOCAL_CLUSTER = "local-cluster"
RUNNERS = ("local", LOCAL_CLUSTER)


def add_run(subparsers) -> None:
    parser = subparsers.add_parser(
        "run",
        parents=[options.config_options()],
        help="run the TFX pipeline locally (LocalDagRunner, Beam DirectRunner, SQLite MLMD)",
        description="Runs the pipeline on this machine: a line per component, progress of the "
        "ingest and of training, then the run's summary; everything else goes to a log under "
        "BUILD_DIR/logs/ (--verbose shows it live). Without --data it generates and uses the "
        "embedded default dataset. One run at a time per pipeline and store: a second one waits "
        f"for the first (or, with --no-wait, fails at once with exit status {exit_codes.BUSY}). "
        "Exit status: "
        + ", ".join(f"{code} {words}" for code, words in exit_codes.IN_WORDS.items())
        + ". Arguments after '--' go to Beam for every Beam-based component.",
    )
    parser.add_argument(
        "--no-wait",
        action="store_true",
        help="fail at once when another run of this pipeline holds the store",
    )
    parser.add_argument(
        "--run-name",
        metavar="TEXT",
        help="a name or note for this run, recorded in ML Metadata and shown beside its id",
    )
    cluster = parser.add_argument_group(
        "Beam runner",
        "local: Beam's DirectRunner in this process (or its worker processes). local-cluster: "
        "every Beam component on a Beam job service and an SDK worker pool started on 127.0.0.1 "
        "as separate processes for this run (the PortableRunner and the Fn API, as on Flink, "
        "Spark or Dataflow), stopped when the run ends; their logs sit beside the run log.",
    )
    cluster.add_argument("--runner", choices=RUNNERS, default="local")
    cluster.add_argument(
        "--job-port", type=int, default=0, help="the job service's port (default: a free one)"
    )
    cluster.add_argument(
        "--worker-pool-port", type=int, default=0, help="the worker pool's (default: a free one)"
    )
    options.store_flags(parser)
    parser.set_defaults(handler=_run_pipeline)


def _run_pipeline(args, beam_args: list[str]) -> int:
    import json

    from components.training.trainer_config import imagenet_download_problem

    try:
        loaded = options.effective_config(args, beam_args, generate_data=False)
        config = loaded.config
        store_target = options.store_target(args, default_sqlite=config.metadata_path)
        store_target.backend()  # one store named, MySQL credentials only with MySQL
        problem = imagenet_download_problem(config.trainer)
        if problem:
            raise ConfigError("trainer.weights", problem)
    except ConfigError as error:
        print(f"imgpipe run: error: {error}", file=sys.stderr)
        return exit_codes.BAD_INPUT
    problem = options.named_input_problem(args, loaded)
    if problem:
        print(f"imgpipe run: error: {problem}", file=sys.stderr)
        return exit_codes.BAD_INPUT
    log_path = console.run_log_path(options.build_dir(args), "run")
    summary = failure = None
    with interrupts.handled(), console.capture(log_path, args.verbose) as shown:
        shown.say(f"imgpipe run: pipeline {config.name}, log {log_path}")
        try:
            # A first run draws the embedded dataset on the other cores while this one imports.
            with contextlib.ExitStack() as stack:
                if args.runner == LOCAL_CLUSTER:
                    config = _on_local_cluster(stack, args, config, log_path, shown.say)
                with options.embedded_data_drawn(args, loaded):
                    from pipeline.runners.local import run_local

                summary = run_local(
                    config,
                    wait=not args.no_wait,
                    on_wait=shown.say,
                    say=shown.say,
                    config_file=None if loaded.settings is None else json.dumps(loaded.settings),
                    store_target=store_target,
                    overrides=tuple(args.set),
                    name=args.run_name,
                )
        except BaseException as error:  # noqa: BLE001 - each failure becomes one error line
            shown.stopped("stopped" if isinstance(error, KeyboardInterrupt) else "failed")
            logging.getLogger(__name__).exception("imgpipe run failed")
            failure = describe_failure(error, shown.component)
    if failure:
        return report_failure("run", failure, log_path)
    _print_summary(summary, config, options.build_dir(args), log_path, store_target.describe())
    return summary.exit_code


def _on_local_cluster(stack: contextlib.ExitStack, args, config, log_path: str, say):
    """Starts the local Beam cluster for the rest of the run (`stack` stops it) and returns the
    config whose Beam components run on it; options after '--' still win."""
    from pipeline.runners.local_cluster import local_cluster

    log_dir = log_path.removesuffix(".log") + "-cluster"
    cluster = stack.enter_context(local_cluster(log_dir, args.job_port, args.worker_pool_port))
    say(
        f"Beam local cluster: job service {cluster.job_endpoint} (pid {cluster.job_service_pid}), "
        f"worker pool {cluster.worker_pool_endpoint} (pid {cluster.worker_pool_pid}); "
        f"logs {log_dir}"
    )
    return dataclasses.replace(config, beam_args=(*cluster.beam_args(), *config.beam_args))


def _print_summary(summary, config, build_dir: str, log_path: str, store: str) -> None:
    """This run's summary (the components were shown live as they ran), then where to look
    further: the store, the pushed model's lineage, the run report and the log."""
    from pipeline.lineage.formatting import format_run_summary
    from pipeline.ui.report import report_path

    print(terminal_safe(format_run_summary(summary, config.min_accuracy)))
    print(f"ML Metadata: {store}; artifacts under {config.pipeline_root}")
    if summary.pushed_to:  # a command that answers the same from any folder
        lineage = f"imgpipe lineage model --latest-pushed --build-dir {os.path.abspath(build_dir)}"
        print(f"where the pushed model came from: {lineage}")
    report = report_path(config.pipeline_root, summary.run_id)
    if os.path.isfile(report):  # a by-product: when it could not be written, the run said so
        print(f"run report (one HTML file): {report}")
    print(f"full log: {log_path}")
