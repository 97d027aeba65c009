"""The `imgpipe` command line: one subcommand per user task, each with --help. This module wires
the parser and runs the chosen command; each command lives in the module named after it."""

from __future__ import annotations

import argparse
import logging
import os
import sys
import warnings

from pipeline import exit_codes
from pipeline.cli import audit, models, predict, prep, queries, run, schema, serve, ui, vertex
from pipeline.cli import config_command as config

LOGGED_COMMANDS = (
    "run",
    "prep",
    "audit",
)  # their console.capture sends the native stderr to a run log


def _configure_logging(verbose: bool) -> None:
    """Commands that do not capture their output (queries, predict) log warnings, or everything
    with --verbose."""
    logging.basicConfig(
        level=logging.INFO if verbose else logging.WARNING,
        format="%(asctime)s %(levelname)s %(message)s",
        datefmt="%H:%M:%S",
    )


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="imgpipe", description="Image classification pipeline on TFX."
    )
    # No -v: TFX's Beam executors re-parse sys.argv with absl, whose -v is its --verbosity.
    parser.add_argument(
        "--verbose",
        action="store_true",
        help="show every log line live (a run's log file under BUILD_DIR/logs/ has them anyway)",
    )
    parser.add_argument("--version", action="version", version=f"imgpipe {_version()}")
    subparsers = parser.add_subparsers(dest="command", required=True)
    prep.add_prep(subparsers)
    prep.add_default_data(subparsers)
    run.add_run(subparsers)
    audit.add_audit(subparsers)
    config.add_config(subparsers)
    queries.add_runs(subparsers)
    queries.add_lineage(subparsers)
    schema.add_schema(subparsers)
    predict.add_predict(subparsers)
    serve.add_serve(subparsers)
    models.add_models(subparsers)
    ui.add_ui(subparsers)
    ui.add_report(subparsers)
    vertex.add_compile_vertex(subparsers)
    return parser


def _version() -> str:
    import importlib.metadata

    return importlib.metadata.version("imgpipe")


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    beam_args = []
    if "--" in argv:
        split = argv.index("--")
        argv, beam_args = argv[:split], argv[split + 1 :]
    args = build_parser().parse_args(argv)
    build_dir = getattr(args, "build_dir", None)
    if build_dir and os.path.exists(build_dir) and not os.path.isdir(build_dir):
        print(
            f"imgpipe {args.command}: error: --build-dir {build_dir} is a file, not a folder",
            file=sys.stderr,
        )
        return exit_codes.BAD_INPUT
    if not args.verbose:
        _quiet_libraries(keeps_a_run_log=args.command in LOGGED_COMMANDS)
    _configure_logging(args.verbose)
    try:
        return args.handler(args, beam_args)
    except BrokenPipeError:
        # The reader stopped reading (`imgpipe runs | head -1`): what it wanted was shown. Later
        # writes, the interpreter's final flush included, go nowhere instead of failing again.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
        return exit_codes.OK


def run_and_exit() -> None:
    """The `imgpipe` console script: main(), and its status as the process's exit status."""
    sys.exit(main())


def _quiet_libraries(keeps_a_run_log: bool) -> None:
    """Silences TensorFlow's C++ start-up chatter and the libraries' deprecation warnings, here and
    in the Beam worker processes (which inherit the environment), so the user's output shows
    imgpipe's progress and results. A command with a run log keeps TensorFlow's C++ errors (its
    console sends the native stderr there); the others would print them, and at import TensorFlow
    logs three harmless ones (CUDA factories registered twice), so they keep only fatal ones.
    --verbose keeps everything."""
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2" if keeps_a_run_log else "3")
    os.environ.setdefault("PYTHONWARNINGS", "ignore::FutureWarning,ignore::DeprecationWarning")
    warnings.simplefilter("ignore", FutureWarning)
    warnings.simplefilter("ignore", DeprecationWarning)
