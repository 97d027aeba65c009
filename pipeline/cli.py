"""The `imgpipe` command line: one subcommand per user task, each with --help."""

from __future__ import annotations

import argparse
import dataclasses
import logging
import os
import re
import sys
import warnings

from data_prep.config import ConfigError, IngestConfig
from data_prep.image_validation import ImageLimits
from pipeline import console, exit_codes
from pipeline.config import PRESETS

_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([kmg]i?b?|b)?\s*$", re.IGNORECASE)
_UNITS = {"": 1, "b": 1, "k": 1024, "m": 1024**2, "g": 1024**3}


def parse_size(text: str) -> int:
    """'100MB', '512k', '2g' or plain bytes -> bytes (binary units)."""
    match = _SIZE.match(text)
    if not match:
        raise argparse.ArgumentTypeError(f"{text!r} is not a size like 100MB, 512KB or 1048576")
    number, unit = match.groups()
    return int(float(number) * _UNITS[(unit or "").lower()[:1]])


def _configure_logging(verbose: bool) -> None:
    """Commands that do not capture their output (queries, predict) log warnings, or everything
    with --verbose."""
    logging.basicConfig(
        level=logging.INFO if verbose else logging.WARNING,
        format="%(asctime)s %(levelname)s %(message)s",
        datefmt="%H:%M:%S",
    )


def _add_prep(subparsers) -> None:
    defaults = IngestConfig(input="")
    limits = ImageLimits()
    parser = subparsers.add_parser(
        "prep",
        help="raw images -> validated, deduplicated, sharded TFRecords (Apache Beam)",
        description=(
            "Ingests a folder of class folders (class = first-level folder) or a CSV/JSONL "
            "manifest "
            "(columns path,label[,split]) into gzip TFRecord shards under OUTPUT/Split-<split>/, "
            "with OUTPUT/label_map.json and OUTPUT/ingest_report.json, which accounts for every "
            "file as accepted, rejected (with a reason) or ignored. Arguments after '--' go to "
            "Beam, e.g. '-- --runner=DataflowRunner --project=P --region=R "
            "--temp_location=gs://B/tmp'. Default: DirectRunner, one worker process per core."
        ),
    )
    parser.add_argument("--input", required=True, help="folder of class folders, or manifest")
    parser.add_argument("--output", required=True, help="output folder (local or Beam URI)")
    parser.add_argument("--eval-fraction", type=float, default=defaults.eval_fraction)
    parser.add_argument("--test-fraction", type=float, default=defaults.test_fraction)
    parser.add_argument(
        "--shard-size",
        type=parse_size,
        default=defaults.target_shard_bytes,
        help="target shard size, e.g. 100MB (default: %(default)s bytes)",
    )
    parser.add_argument(
        "--max-reject-fraction",
        type=float,
        default=defaults.max_reject_fraction,
        help="fail when more than this share of image files is rejected (default: %(default)s)",
    )
    parser.add_argument(
        "--max-side", type=int, default=None, help="downscale images whose longer side is larger"
    )
    parser.add_argument(
        "--max-pixels",
        type=int,
        default=limits.max_pixels,
        help="refuse images with more pixels, from the header (default: %(default)s)",
    )
    parser.add_argument(
        "--max-file-size",
        type=parse_size,
        default=limits.max_file_bytes,
        help="refuse larger files unread (default: %(default)s bytes)",
    )
    parser.add_argument("--files-per-bundle", type=int, default=defaults.files_per_bundle)
    parser.add_argument("--build-dir", default="build", help="where the run log goes (logs/)")
    parser.set_defaults(handler=_run_prep)


def _run_prep(args, beam_args: list[str]) -> int:
    from data_prep.ingest import IngestOutputs, run_ingest
    from data_prep.plan import left_out_message

    failure = None
    config = IngestConfig(
        input=args.input,
        eval_fraction=args.eval_fraction,
        test_fraction=args.test_fraction,
        target_shard_bytes=args.shard_size,
        max_reject_fraction=args.max_reject_fraction,
        files_per_bundle=args.files_per_bundle,
        limits=dataclasses.replace(
            ImageLimits(),
            max_side=args.max_side,
            max_pixels=args.max_pixels,
            max_file_bytes=args.max_file_size,
        ),
    )
    try:
        config.validate()
    except ConfigError as error:
        print(f"imgpipe prep: error: {error}", file=sys.stderr)
        return exit_codes.BAD_INPUT
    outputs = IngestOutputs.under(args.output)
    log_path = console.run_log_path(args.build_dir, "prep")
    with console.capture(log_path, args.verbose):
        try:
            report = run_ingest(config, outputs, beam_args)
        except BaseException as error:  # noqa: BLE001 - each failure becomes one error line
            logging.getLogger(__name__).exception("imgpipe prep failed")
            failure = _failure(error, "the ingest")
    if failure:
        return _fail("prep", failure, log_path)
    totals = report["totals"]
    print(
        f"{totals['found']} files: {totals['accepted']} accepted, {totals['rejected']} rejected, "
        f"{totals['ignored']} ignored"
    )
    print(
        f"per split: {report['accepted_per_split']}; rejected by reason: "
        f"{report['rejected_per_reason'] or 'none'}"
    )
    for name in report["classes_left_out"]:
        print(left_out_message(name))
    print(
        f"{len(report['shards'])} shards under {outputs.examples_dir}; "
        f"report: {outputs.report_path}; label map: {outputs.label_map_path}"
    )
    print(f"log: {log_path}")
    return exit_codes.OK


def _add_default_data(subparsers) -> None:
    parser = subparsers.add_parser(
        "default-data",
        help="write the embedded default dataset (generated locally, deterministic)",
        description="Generates the default labelled image dataset as JPEGs in class folders. "
        "A complete dataset already in OUTPUT is left as it is.",
    )
    parser.add_argument("--output", required=True)
    parser.add_argument("--images-per-class", type=int, default=300)
    parser.add_argument("--seed", type=int, default=0)
    parser.set_defaults(handler=_run_default_data)


def _run_default_data(args, beam_args: list[str]) -> int:
    from data_prep.default_dataset import generate_default_dataset

    try:
        counts = generate_default_dataset(
            args.output, images_per_class=args.images_per_class, seed=args.seed
        )
    except ValueError as error:
        print(f"imgpipe default-data: error: {error}", file=sys.stderr)
        return exit_codes.BAD_INPUT
    print(
        f"default dataset: {sum(counts.values())} images in {len(counts)} classes "
        f"under {args.output}"
    )
    return exit_codes.OK


def _config_options() -> argparse.ArgumentParser:
    """How a command picks its settings: preset, config file, --set overrides, data, build dir."""
    parent = argparse.ArgumentParser(add_help=False)
    parent.add_argument("--data", help="folder of class folders or a manifest (default: embedded)")
    parent.add_argument("--preset", choices=list(PRESETS), default="local")
    parent.add_argument("--build-dir", default="build", help="pipeline root, MLMD, models, logs")
    parent.add_argument(
        "--config",
        metavar="FILE",
        help="a YAML (or .toml) file of settings over the preset, e.g. pipeline/example.yaml; "
        "`imgpipe config show` prints every field",
    )
    parent.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="FIELD=VALUE",
        help="override one setting (after --config), e.g. trainer.epochs=5, "
        "trainer.precision=mixed_bfloat16, trainer.jit_compile=true, min_accuracy=0.8 "
        "(repeatable; the fields are documented in pipeline/config.py and "
        "components/trainer/config.py)",
    )
    return parent


def _add_run(subparsers) -> None:
    parser = subparsers.add_parser(
        "run",
        parents=[_config_options()],
        help="run the TFX pipeline locally (LocalDagRunner, Beam DirectRunner, SQLite MLMD)",
        description="Runs the pipeline on this machine: a line per component, progress of the "
        "ingest and of training, then the run's summary; everything else goes to a log under "
        "BUILD_DIR/logs/ (--verbose shows it live). Without --data it generates and uses the "
        "embedded default dataset. One run at a time per pipeline and store: a second one waits "
        "for the first (or, with --no-wait, fails at once with exit status 5). Exit status: "
        "0 pushed, 1 a component failed, 2 bad settings or input, 3 not pushed, 4 stopped by the "
        "data gate, 5 busy, 130 interrupted. Arguments after '--' go to Beam for every "
        "Beam-based component.",
    )
    parser.add_argument(
        "--no-wait",
        action="store_true",
        help="fail at once when another run of this pipeline holds the store",
    )
    _store_flags(parser)
    parser.set_defaults(handler=_run_pipeline)


def _add_config(subparsers) -> None:
    parser = subparsers.add_parser(
        "config",
        help="the effective settings: `config show` prints every field as a config file",
    )
    show = parser.add_subparsers(dest="config_command", required=True).add_parser(
        "show",
        parents=[_config_options()],
        help="print the effective config (preset, --config, --set) with its defaults, as YAML",
        description="Prints every field of the effective pipeline config as a YAML file that "
        "`--config` reads back to the same config.",
    )
    show.set_defaults(handler=_run_config_show)


def _effective_config(args, beam_args: list[str], generate_data: bool, **changes):
    """The preset, then the config file, then --data, then --set, validated; returns the config
    and the config file's settings (None without --config). When nothing names the data, it is
    the embedded dataset under --build-dir, generated (once valid) when generate_data."""
    from data_prep.default_dataset import generate_default_dataset
    from pipeline import config_file
    from pipeline.config import override

    settings = config_file.read_settings(args.config) if args.config else None
    named = args.data or (settings or {}).get("ingest", {}).get("input")
    data = named or os.path.join(args.build_dir, "default_data")
    config = dataclasses.replace(PRESETS[args.preset](data, args.build_dir), **changes)
    config = dataclasses.replace(config, beam_args=(*config.beam_args, *beam_args))
    if settings is not None:
        config = config_file.apply_settings(config, settings, args.config)
    if args.data:
        config = dataclasses.replace(
            config, ingest=dataclasses.replace(config.ingest, input=args.data)
        )
    for setting in args.set:
        config = override(config, setting)
    config.validate()
    if generate_data and config.ingest.input == data and not named:
        generate_default_dataset(data)
    return config, settings


def _run_config_show(args, beam_args: list[str]) -> int:
    from pipeline import config_file

    try:
        config, _ = _effective_config(args, beam_args, generate_data=False)
    except ConfigError as error:
        print(f"imgpipe config: error: {error}", file=sys.stderr)
        return exit_codes.BAD_INPUT
    print(config_file.dump(config), end="")
    return exit_codes.OK


def _failure(error: BaseException, where: str | None) -> tuple[int, str]:
    """The exit status and error line of work that raised `error` while `where` (a component,
    or None) ran; the traceback is in the log."""
    from data_prep.ingest import IngestFailed
    from data_prep.sources import SourceError
    from pipeline.run_guard import RunBusy

    place = f"{where}: " if where else ""
    if isinstance(error, KeyboardInterrupt):
        return exit_codes.INTERRUPTED, f"interrupted{' in ' + where if where else ''}"
    if isinstance(error, RunBusy):
        return exit_codes.BUSY, f"{error}; leave out --no-wait to wait for it"
    if isinstance(error, (ConfigError, SourceError, IngestFailed)):
        return exit_codes.BAD_INPUT, f"{place}{error}"
    lines = [line.strip() for line in str(error).strip().splitlines() if line.strip()]
    # Beam wraps a worker's exception in its traceback: the cause is the last line.
    detail = lines[-1] if lines else ""
    return exit_codes.COMPONENT_FAILED, f"{place}{type(error).__name__}: {detail}"[:400]


def _fail(command: str, failure: tuple[int, str], log_path: str) -> int:
    code, message = failure
    print(f"imgpipe {command}: error: {message} (full log: {log_path})", file=sys.stderr)
    return code


def _raise_interrupt(signum, frame):
    raise KeyboardInterrupt


def _run_pipeline(args, beam_args: list[str]) -> int:
    import json
    import signal

    try:
        config, settings = _effective_config(args, beam_args, generate_data=True)
        store_target = _store_target(args, default_sqlite=config.metadata_path)
        store_target.backend()  # one store named, MySQL credentials only with MySQL
    except ConfigError as error:
        print(f"imgpipe run: error: {error}", file=sys.stderr)
        return exit_codes.BAD_INPUT
    log_path = console.run_log_path(args.build_dir, "run")
    summary = failure = None
    previous_handler = signal.signal(signal.SIGTERM, _raise_interrupt)
    with console.capture(log_path, args.verbose) as shown:
        shown.say(f"imgpipe run: pipeline {config.name}, log {log_path}")
        try:
            from pipeline.local_runner import run_local

            summary = run_local(
                config,
                wait=not args.no_wait,
                on_wait=shown.say,
                config_file=None if settings is None else json.dumps(settings),
                store_target=store_target,
            )
        except BaseException as error:  # noqa: BLE001 - each failure becomes one error line
            shown.stopped("stopped" if isinstance(error, KeyboardInterrupt) else "failed")
            logging.getLogger(__name__).exception("imgpipe run failed")
            failure = _failure(error, shown.component)
        finally:
            signal.signal(signal.SIGTERM, previous_handler)
    if failure:
        return _fail("run", failure, log_path)
    _print_summary(summary, config, args.build_dir, log_path, store_target.describe())
    return summary.exit_code


def _print_summary(summary, config, build_dir: str, log_path: str, store: str) -> None:
    """This run's summary (the components were shown live as they ran)."""
    from data_prep.plan import left_out_message

    print(f"run {summary.run_id} of pipeline {config.name}: {summary.status}")
    if summary.span is not None:
        news = "new data, ingested now" if summary.new_data else "unchanged input, from the cache"
        counts = ", ".join(f"{count} {name}" for name, count in summary.ingest_counts.items())
        print(f"data: span {summary.span} ({news}): {counts} files; {summary.ingest_report}")
        for name in summary.classes_left_out:
            print(f"data: {left_out_message(name)}")
    if summary.eval_accuracy is not None:
        print(f"eval accuracy: {summary.eval_accuracy:.4f} (threshold {config.min_accuracy})")
    if summary.blessed is not None:
        print(f"blessed: {'yes' if summary.blessed else 'no'}")
    _print_outcome(summary)
    if summary.training_performance:
        perf = summary.training_performance
        print(
            f"training: {perf['images_per_second']:.1f} images/s, step "
            f"{perf['step_time_seconds'] * 1000:.1f} ms, input wait "
            f"{perf['input_wait_share']:.0%}, {perf['precision']}, XLA {bool(perf['xla'])}, "
            f"{perf['replicas']} replica(s), {perf['retraces']} retrace(s)"
        )
    _print_model_reports(summary)
    print(f"ML Metadata: {store}; artifacts under {config.pipeline_root}")
    if summary.pushed_to:
        lineage = f"imgpipe lineage model --latest-pushed --build-dir {build_dir}"
        print(f"where the pushed model came from: {lineage}")
    from pipeline.ui.report import report_path

    print(f"run report (one HTML file): {report_path(config.pipeline_root, summary.run_id)}")
    print(f"full log: {log_path}")


def _print_outcome(summary) -> None:
    """Whether the run pushed a model, where, or why not (the one place the summary says so)."""
    print(f"pushed: {summary.pushed_to or 'no'}")
    if summary.not_pushed_reason:
        print(f"not pushed, stopped by the {summary.stopped_by}: {summary.not_pushed_reason}")
    if summary.baseline_skipped:
        print(f"baseline comparison skipped: {summary.baseline_skipped}")


def _store_flags(parser: argparse.ArgumentParser):
    """The flags that name an ML Metadata store, as one argument group of `parser`."""
    store = parser.add_argument_group(
        "metadata store",
        "default: the local SQLite store under --build-dir. Each flag may instead come from "
        "IMGPIPE_MLMD_SQLITE, IMGPIPE_MLMD_MYSQL, IMGPIPE_MLMD_GRPC, IMGPIPE_MLMD_USER; a MySQL "
        "password only from IMGPIPE_MLMD_PASSWORD.",
    )
    store.add_argument("--mlmd-sqlite", metavar="PATH", help="a SQLite ML Metadata file")
    store.add_argument("--mlmd-mysql", metavar="HOST[:PORT]/DB", help="a MySQL ML Metadata store")
    store.add_argument("--mlmd-user", metavar="USER", help="MySQL user")
    store.add_argument("--mlmd-grpc", metavar="HOST:PORT", help="an ML Metadata gRPC service")
    return store


def _store_options(defaults: bool = True, answers: bool = True) -> argparse.ArgumentParser:
    """Options every ML Metadata query shares: which store, which pipeline, JSON or tables.

    defaults=False for a nested subcommand, so `runs --json diff A B` keeps what `runs` parsed;
    answers=False for commands that print no answer (ui, report): the store options only.
    """
    parent = argparse.ArgumentParser(
        add_help=False, argument_default=None if defaults else argparse.SUPPRESS
    )
    store = _store_flags(parent)
    store.add_argument(
        "--build-dir",
        default="build" if defaults else argparse.SUPPRESS,
        help="as for `imgpipe run`",
    )
    if not answers:
        return parent
    parent.add_argument("--pipeline", help="only runs of this pipeline (default: all)")
    parent.add_argument(
        "--json",
        action="store_true",
        default=False if defaults else argparse.SUPPRESS,
        help="print JSON instead of tables",
    )
    return parent


def _add_runs(subparsers) -> None:
    options = _store_options()
    parser = subparsers.add_parser(
        "runs",
        parents=[options],
        help="pipeline runs, newest first; `runs diff A B` compares two",
        description="Lists pipeline runs from ML Metadata, newest first: start, duration, status, "
        "whether each component ran or came from the cache, eval accuracy, blessing and push.",
    )
    parser.set_defaults(handler=_run_query, query="runs")
    diff = parser.add_subparsers(dest="runs_command").add_parser(
        "diff",
        parents=[_store_options(defaults=False)],
        help="what differs between two runs",
        description="Compares two runs' settings, code fingerprint, data (input fingerprint, file "
        "and split counts), metrics, outcome, artifacts and component states. A run is named by "
        "its id, a unique prefix of it, `latest` or `latest~N` (N runs before the latest).",
    )
    diff.add_argument("run_a")
    diff.add_argument("run_b")
    diff.set_defaults(query="diff")


def _add_lineage(subparsers) -> None:
    options = _store_options()
    parser = subparsers.add_parser(
        "lineage",
        help="where a model came from; what was made from a dataset; who used an image",
        description="Follows ML Metadata events by their input/output names, never through the "
        "Evaluator's baseline into older models.",
    )
    kinds = parser.add_subparsers(dest="lineage_command", required=True)
    model = kinds.add_parser(
        "model",
        parents=[options],
        help="upstream of a pushed model or model",
        description="Pushed model -> model -> Trainer (config, code fingerprint, performance) -> "
        "transform graph -> examples (splits, label map, ingest report) -> ImageExampleGen "
        "(input, files, input fingerprint), and the evaluation that blessed it.",
    )
    model.add_argument(
        "model", nargs="?", help="a PushedModel or Model artifact id, or a pushed model's folder"
    )
    model.add_argument("--latest-pushed", action="store_true", help="the newest pushed model")
    model.set_defaults(handler=_run_query, query="model")
    examples = kinds.add_parser(
        "examples",
        parents=[options],
        help="downstream of an Examples artifact: models trained on it, blessed, pushed",
    )
    examples.add_argument("examples", type=int, help="Examples artifact id")
    examples.set_defaults(handler=_run_query, query="examples")
    image = kinds.add_parser(
        "image",
        parents=[options],
        help="which datasets and models included an image (by path or content)",
        description="Searches each dataset's source index (written by the ingest) for the image's "
        "path and its sha256, so a renamed copy or a since-changed file is found too.",
    )
    image.add_argument("path", help="the image file, or its path relative to the input folder")
    image.set_defaults(handler=_run_query, query="image")


def _run_query(args, beam_args: list[str]) -> int:
    from ml_metadata import errors

    from pipeline import lineage, lineage_format, run_guard
    from pipeline.mlmd_connection import StoreNotFound

    command = "runs" if args.query in ("runs", "diff") else "lineage"
    try:
        target = _store_target(args)
        if target.backend() == "sqlite":  # a local store: no dead run is left shown running
            run_guard.settle_orphans(target.sqlite or target.default_sqlite)
        store = target.open()
        if args.query == "runs":
            answer = lineage.list_runs(store, args.pipeline)
            text = lineage_format.format_runs
        elif args.query == "diff":
            answer = lineage.diff_runs(store, args.run_a, args.run_b, args.pipeline)
            text = lineage_format.format_diff
        elif args.query == "model":
            if bool(args.model) == args.latest_pushed:
                raise lineage.LineageError("give a model id or folder, or --latest-pushed")
            artifact_id = (
                lineage.latest_pushed_model(store)
                if args.latest_pushed
                else lineage.find_model(store, args.model)
            )
            answer = lineage.model_lineage(store, artifact_id)
            text = lineage_format.format_model_lineage
        elif args.query == "examples":
            answer = lineage.examples_lineage(store, args.examples)
            text = lineage_format.format_examples_lineage
        else:
            answer = lineage.image_lineage(store, args.path)
            text = lineage_format.format_image_lineage
    except (ConfigError, StoreNotFound, lineage.LineageError) as error:
        print(f"imgpipe {command}: error: {error}", file=sys.stderr)
        return exit_codes.BAD_INPUT
    except errors.StatusError as error:
        print(f"imgpipe {command}: error: {target.describe()}: {error}", file=sys.stderr)
        return exit_codes.BAD_INPUT
    print(lineage_format.to_json(answer) if args.json else text(answer))
    return exit_codes.OK


def _store_target(args, default_sqlite: str | None = None):
    """The ML Metadata store the store flags name (default: `default_sqlite`, else the SQLite
    file of --build-dir)."""
    from pipeline.mlmd_connection import MlmdTarget, metadata_path_under

    return MlmdTarget.resolve(
        {
            "sqlite": args.mlmd_sqlite,
            "mysql": args.mlmd_mysql,
            "grpc": args.mlmd_grpc,
            "user": args.mlmd_user,
        },
        default_sqlite=default_sqlite or metadata_path_under(args.build_dir),
    )


def _add_ui(subparsers) -> None:
    parser = subparsers.add_parser(
        "ui",
        parents=[_store_options(answers=False)],
        help="a read-only local web app: runs, data, mistakes, training curves and lineage",
        description="Serves pages over the metadata store and the artifacts: the runs (select two "
        "to compare), each run (components, ingest report with rejected files, training curves, "
        "evaluation with the misclassified images, serving check, TFLite, model card) and a "
        "model's lineage as a graph, with an image search. It has no login: it listens on "
        "127.0.0.1 unless told otherwise.",
    )
    parser.add_argument("--host", default="127.0.0.1", help="address to listen on")
    parser.add_argument("--port", type=int, default=8765, help="port (default: %(default)s)")
    parser.set_defaults(handler=_run_ui)


def _run_ui(args, beam_args: list[str]) -> int:
    import socket
    import threading

    from werkzeug.serving import make_server

    from pipeline.mlmd_connection import StoreNotFound
    from pipeline.ui.app import create_app, is_loopback, warm_up

    try:
        target = _store_target(args)
        target.open()  # fail now, not at the first page, when the store is not there
        # Bound here, not by Werkzeug, which prints its own lines and exits when the port is taken.
        family = socket.AF_INET6 if ":" in args.host else socket.AF_INET
        with socket.create_server((args.host, args.port), family=family) as listener:
            app = create_app(target.open, target.describe())
            server = make_server(args.host, args.port, app, threaded=True, fd=listener.fileno())
    except (ConfigError, StoreNotFound) as error:
        print(f"imgpipe ui: error: {error}", file=sys.stderr)
        return exit_codes.BAD_INPUT
    except OSError as error:
        print(
            f"imgpipe ui: error: cannot listen on {args.host}:{args.port}: {error}", file=sys.stderr
        )
        return exit_codes.BAD_INPUT
    if not is_loopback(args.host):
        print(
            f"imgpipe ui: warning: listening on {args.host}, reachable from other machines; the "
            "UI has no login, so anyone who can reach it reads every run and image",
            file=sys.stderr,
        )
    if not args.verbose:  # one line per request is the web server's log, not the user's
        logging.getLogger("werkzeug").setLevel(logging.WARNING)
    print(f"imgpipe ui: http://{args.host}:{server.port}/ over {target.describe()}")
    print("read-only; Ctrl-C stops it", flush=True)
    threading.Thread(target=warm_up, daemon=True).start()
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
    return exit_codes.OK


def _add_report(subparsers) -> None:
    parser = subparsers.add_parser(
        "report",
        parents=[_store_options(answers=False)],
        help="one run's page as a self-contained HTML file (images embedded)",
        description="Writes the run page of `imgpipe ui` as one HTML file with its style and "
        "thumbnails inside, for CI artifacts and e-mail. A run is named by its id, a unique "
        "prefix of it, `latest` or `latest~N`. Every local run also writes it beside its "
        "summary.",
    )
    parser.add_argument("run", help="run id, unique prefix, latest or latest~N")
    parser.add_argument("--output", required=True, help="the HTML file to write")
    parser.set_defaults(handler=_run_report)


def _run_report(args, beam_args: list[str]) -> int:
    from ml_metadata import errors

    from pipeline.lineage import LineageError
    from pipeline.mlmd_connection import StoreNotFound
    from pipeline.ui.report import write_report

    try:
        target = _store_target(args)
        run_id = write_report(target.open(), args.run, args.output)
    except (ConfigError, StoreNotFound, LineageError) as error:
        print(f"imgpipe report: error: {error}", file=sys.stderr)
        return exit_codes.BAD_INPUT
    except errors.StatusError as error:
        print(f"imgpipe report: error: {target.describe()}: {error}", file=sys.stderr)
        return exit_codes.BAD_INPUT
    except OSError as error:
        print(f"imgpipe report: error: cannot write {args.output}: {error}", file=sys.stderr)
        return exit_codes.BAD_INPUT
    print(f"run {run_id}: {args.output}")
    return exit_codes.OK


def _add_schema(subparsers) -> None:
    parser = subparsers.add_parser(
        "schema",
        help="the pipeline's decided data schema: show it, or export it to a file",
        description="Every span is validated against one schema: the one curated from the "
        "pipeline's first span (volatile features such as sha256 and source_path carry no value "
        "domain; image_format is one of the formats the ingest writes; height and width are "
        "bounded), kept in ML Metadata. `show` prints it as a text proto; `export PATH` writes "
        "it, e.g. to review it or to commit it beside the code.",
    )
    actions = parser.add_subparsers(dest="schema_command", required=True)
    show = actions.add_parser("show", parents=[_store_options()], help="print it")
    show.set_defaults(handler=_run_schema, output=None)
    export = actions.add_parser("export", parents=[_store_options()], help="write it to a file")
    export.add_argument("output", help="the file to write (a text-format Schema proto)")
    export.set_defaults(handler=_run_schema)


def _run_schema(args, beam_args: list[str]) -> int:
    from apache_beam.io.filesystems import FileSystems

    from components.curated_schema_gen import SCHEMA_FILE
    from pipeline.config import PipelineConfig
    from pipeline.data_snapshot import decided_schema_uri
    from pipeline.mlmd_connection import StoreNotFound

    pipeline = args.pipeline or PipelineConfig.name
    try:
        uri = decided_schema_uri(_store_target(args).open(), pipeline)
    except (ConfigError, StoreNotFound) as error:
        print(f"imgpipe schema: error: {error}", file=sys.stderr)
        return exit_codes.BAD_INPUT
    if uri is None:
        print(
            f"imgpipe schema: error: pipeline {pipeline!r} has no schema yet; its first run "
            "decides it",
            file=sys.stderr,
        )
        return exit_codes.BAD_INPUT
    with FileSystems.open(FileSystems.join(uri, SCHEMA_FILE)) as handle:
        text = handle.read().decode()
    if args.output is None:
        print(text, end="")
        return exit_codes.OK
    with open(args.output, "w") as handle:
        handle.write(text)
    print(f"schema of pipeline {pipeline} written to {args.output}")
    return exit_codes.OK


def _print_model_reports(summary) -> None:
    """The serving check, the readable evaluation, TFLite and the model card of a run."""
    check = summary.serving_check
    if check is not None:
        verdict = "passed" if check["blessed"] else f"refused ({check.get('problems', '')})"
        timing = ""
        if "latency_p50_ms" in check:
            timing = (
                f"; load {check['load_seconds']:.2f} s, single-image latency "
                f"p50 {check['latency_p50_ms']:.1f} ms, p99 {check['latency_p99_ms']:.1f} ms"
            )
        print(f"serving check: {verdict}{timing}")
    evaluation = summary.evaluation
    if evaluation is not None:
        from components.evaluation_report import shown

        print(
            "eval per class (precision / recall / F1; - where undefined), "
            f"macro F1 {shown(evaluation['macro_f1'])}:"
        )
        for row in evaluation["per_class"]:
            print(
                f"  {row['class']:<20} {shown(row['precision'])} / {shown(row['recall'])} / "
                f"{shown(row['f1'])}  ({row['support']} images)"
            )
        pairs = ", ".join(
            f"{p['true']} -> {p['predicted']} ({p['count']})" for p in evaluation["most_confused"]
        )
        print(f"most confused (true -> predicted): {pairs or 'none'}")
        print(
            f"misclassified eval images: {evaluation['misclassified_count']}; report, "
            f"confusion_matrix.png and misclassified.csv in {evaluation['uri']}"
        )
    if summary.tflite is not None:
        gaps = ", ".join(
            f"{name.split('_')[0]} {value:+.2f}"
            for name, value in sorted(summary.tflite.items())
            if name.endswith("_gap_points")
        )
        print(f"TFLite accuracy, points below the SavedModel on the eval split: {gaps}")
    if summary.model_card is not None:
        print(f"model card: {summary.model_card}")


def _add_predict(subparsers) -> None:
    parser = subparsers.add_parser(
        "predict",
        help="top-k classes of image files with an exported model",
        description="Classifies image files with a SavedModel exported by the pipeline (a pushed "
        "version folder, or the Pusher's base folder for its newest version). Files go through "
        "the ingest's validation and conversion, so every format the ingest accepts works "
        "(JPEG, PNG, WebP, TIFF, BMP, GIF, grayscale, EXIF-rotated). A file that is not a usable "
        "image gets an error naming why; the others are still answered, and the exit status is "
        "1.",
    )
    parser.add_argument("--model", required=True, help="SavedModel folder or Pusher base folder")
    parser.add_argument("--top-k", type=int, default=3, help="classes per file (default: 3)")
    parser.add_argument("files", nargs="+", metavar="FILE")
    parser.set_defaults(handler=_run_predict)


def _run_predict(args, beam_args: list[str]) -> int:
    from pipeline.predict import Failure, predict_files

    try:
        results = predict_files(args.model, args.files, args.top_k)
    except (FileNotFoundError, ValueError) as error:
        print(f"imgpipe predict: error: {error}", file=sys.stderr)
        return exit_codes.BAD_INPUT
    for result in results:
        if isinstance(result, Failure):
            print(
                f"imgpipe predict: {result.path}: {result.reason}: {result.detail}",
                file=sys.stderr,
            )
        else:
            answer = ", ".join(f"{name} {probability:.3f}" for name, probability in result.top)
            print(f"{result.path}: {answer}")
    return 1 if any(isinstance(result, Failure) for result in results) else 0


def _add_compile_vertex(subparsers) -> None:
    parser = subparsers.add_parser(
        "compile-vertex",
        parents=[_config_options()],
        help="write the Vertex AI / Kubeflow Pipelines job spec (TFX KubeflowV2DagRunner)",
        description="Compiles the pipeline into a PipelineJob JSON for Vertex AI Pipelines or "
        "Kubeflow Pipelines v2; every component runs in IMAGE, built from pipeline/Dockerfile. "
        "Compile once per data drop: --span numbers it (Vertex keeps its own ML Metadata). "
        "Arguments after '--' go to Beam for every Beam-based component, e.g. "
        "'-- --runner=DataflowRunner --project=P --region=R --temp_location=gs://B/tmp'. "
        "Needs the orchestrators environment (make compile-vertex).",
    )
    parser.add_argument("--pipeline-root", required=True, help="artifact root, e.g. gs://b/tfx")
    parser.add_argument("--image", required=True, help="container image the components run in")
    parser.add_argument("--span", type=int, default=1, help="this data drop's span")
    parser.add_argument(
        "--serving-dir", help="where blessed models are pushed (default: PIPELINE_ROOT/serving)"
    )
    parser.add_argument("--output", default=os.path.join("build", "vertex", "imgpipe.json"))
    parser.set_defaults(handler=_run_compile_vertex)


def _run_compile_vertex(args, beam_args: list[str]) -> int:
    from pipeline.vertex_runner import compile_vertex, snapshot_for_vertex

    try:
        config, _ = _effective_config(
            args,
            beam_args,
            generate_data=True,
            pipeline_root=args.pipeline_root,
            serving_dir=args.serving_dir or f"{args.pipeline_root.rstrip('/')}/serving",
        )
        data = config.ingest.input
        snapshot = snapshot_for_vertex(data, args.span)
    except (ConfigError, ValueError) as error:
        print(f"imgpipe compile-vertex: error: {error}", file=sys.stderr)
        return exit_codes.BAD_INPUT
    os.makedirs(os.path.dirname(os.path.abspath(args.output)), exist_ok=True)
    spec = compile_vertex(config, snapshot, args.image, args.output)
    tasks = spec["pipelineSpec"]["root"]["dag"]["tasks"]
    print(f"{args.output}: {len(tasks)} tasks in {args.image}, pipeline root {args.pipeline_root}")
    print(f"data: {data} as span {snapshot.span}")
    return exit_codes.OK


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="imgpipe", description="Image classification pipeline on TFX."
    )
    parser.add_argument(
        "-v",
        "--verbose",
        action="store_true",
        help="show every log line live (a run's log file under BUILD_DIR/logs/ has them anyway)",
    )
    subparsers = parser.add_subparsers(dest="command", required=True)
    _add_prep(subparsers)
    _add_default_data(subparsers)
    _add_run(subparsers)
    _add_config(subparsers)
    _add_runs(subparsers)
    _add_lineage(subparsers)
    _add_schema(subparsers)
    _add_predict(subparsers)
    _add_ui(subparsers)
    _add_report(subparsers)
    _add_compile_vertex(subparsers)
    return parser


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    beam_args = []
    if "--" in argv:
        split = argv.index("--")
        argv, beam_args = argv[:split], argv[split + 1 :]
    args = build_parser().parse_args(argv)
    if not args.verbose:
        _quiet_libraries()
    _configure_logging(args.verbose)
    return args.handler(args, beam_args)


def _quiet_libraries() -> None:
    """Silences TensorFlow's C++ start-up chatter and the libraries' deprecation warnings, here and
    in the Beam worker processes (which inherit the environment), so the user's output shows
    imgpipe's progress and results. --verbose keeps everything."""
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    os.environ.setdefault("PYTHONWARNINGS", "ignore::FutureWarning,ignore::DeprecationWarning")
    warnings.simplefilter("ignore", FutureWarning)
    warnings.simplefilter("ignore", DeprecationWarning)


if __name__ == "__main__":
    sys.exit(main())
