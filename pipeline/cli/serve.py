"""`imgpipe serve`: the pushed model behind TensorFlow Serving's REST API, reloaded when a new
version is pushed."""

from __future__ import annotations

import os
import sys

from data_prep.contract.config_error import ConfigError
from pipeline import exit_codes
from pipeline.cli import options

DEFAULT_PORT = 8501  # TensorFlow Serving's REST port


def add_serve(subparsers) -> None:
    parser = subparsers.add_parser(
        "serve",
        parents=[options.config_options()],
        help="serve the pushed model on TensorFlow Serving's REST API",
        description="Answers TensorFlow Serving's REST API (GET /v1/models/NAME, "
        "/v1/models/NAME/metadata, POST /v1/models/NAME[/versions/N]:predict with `instances` "
        'or `inputs`, {"b64": ...} for image bytes) for the highest version (or the one '
        "`imgpipe models rollback` pinned) under <serving_dir>/<name>/, the Pusher's folder of "
        "the settings (--build-dir, --config, --set), or under --model. A version pushed "
        "meanwhile is loaded and warmed up in the background, then served; the previous one "
        "answers until then. Every image goes through the ingest's checks first, so a "
        "non-image or a decompression bomb is a 400 naming the problem. It has no login: it "
        "listens on 127.0.0.1 unless told otherwise.",
    )
    parser.add_argument(
        "--model",
        metavar="DIR",
        help="a Pusher base folder (numbered versions, watched for new ones; its name is the "
        "model's) or one SavedModel folder (default: <serving_dir>/<name>/ of the settings)",
    )
    parser.add_argument("--host", default="127.0.0.1", help="address to listen on")
    parser.add_argument(
        "--port", type=int, default=DEFAULT_PORT, help="port (default: %(default)s, as TF Serving)"
    )
    parser.add_argument(
        "--max-request-bytes",
        type=int,
        default=32 * 1024 * 1024,
        metavar="N",
        help="a request body above N bytes gets 413 (default: %(default)s)",
    )
    parser.add_argument(
        "--poll-seconds",
        type=float,
        default=2.0,
        metavar="S",
        help="how often to look for a newly pushed version (default: %(default)s)",
    )
    parser.add_argument(
        "--max-batch",
        type=int,
        default=8,
        metavar="N",
        help="rows of concurrent requests run as one model call; 1 runs each request alone "
        "(default: %(default)s)",
    )
    parser.add_argument(
        "--batch-wait-ms",
        type=float,
        default=5.0,
        metavar="MS",
        help="how long a request waits for others to share a model call, only while one runs; "
        "0 runs each request alone (default: %(default)s)",
    )
    parser.set_defaults(handler=_run_serve)


def _run_serve(args, beam_args: list[str]) -> int:
    from pipeline.cli.listening import ListenError, listen

    try:
        config = options.effective_config(args, beam_args, generate_data=False).config
        settings = _settings(args, config)
        name, base, version, model_dir = _model(args, config)
        listener = listen(args.host, args.port)
    except (ConfigError, ListenError, LookupError, ValueError) as error:
        print(f"imgpipe serve: error: {error}", file=sys.stderr)
        return exit_codes.BAD_INPUT
    with listener:
        return _serve(args, listener, name, base, version, model_dir, settings)


def _settings(args, config):
    from pipeline.serving.server import ServeSettings

    return ServeSettings(
        max_request_bytes=args.max_request_bytes,
        poll_seconds=args.poll_seconds,
        max_batch=args.max_batch,
        batch_wait_ms=args.batch_wait_ms,
        limits=config.ingest.limits,
    ).validate()


def _model(args, config) -> tuple[str, str | None, int, str]:
    """(model name, base folder to watch or None, first version, its folder). A base folder
    names the model, as the Pusher names it after the pipeline; one SavedModel takes the
    pipeline's name."""
    from components.serving.versions import SAVED_MODEL_FILE, served_version, version_dir

    if args.model and os.path.isfile(os.path.join(args.model, SAVED_MODEL_FILE)):
        folder = os.path.basename(os.path.normpath(args.model))
        return config.name, None, int(folder) if folder.isdigit() else 1, args.model
    base = args.model or os.path.join(config.serving_dir, config.name)
    version = served_version(base)
    if version is None:
        raise LookupError(
            f"{base} holds no pushed model (numbered folders with a SavedModel); push one with "
            "`imgpipe run`, or name one with --model"
        )
    return os.path.basename(os.path.normpath(base)), base, version, version_dir(base, version)


def _serve(args, listener, name, base, version, model_dir, settings) -> int:
    from pipeline.cli.listening import reachability_warning
    from pipeline.serving.servable import NotServable, load_servable
    from pipeline.serving.server import VersionWatcher, run

    try:
        first = load_servable(version, model_dir)
    except NotServable as problem:
        print(f"imgpipe serve: error: {problem}", file=sys.stderr)
        return exit_codes.BAD_INPUT
    watcher = VersionWatcher(
        name, base, first, lambda line: print(f"imgpipe serve: {line}", flush=True)
    )
    warning = reachability_warning(
        "serve", args.host, "the server has no login, so anyone who can reach it uses the model"
    )
    if warning:
        print(warning, file=sys.stderr)
    port = listener.getsockname()[1]
    url = f"http://{args.host}:{port}/v1/models/{name}"
    print(f"imgpipe serve: {url} version {version} from {model_dir}")
    watching = f"watching {base} for new versions; " if base else ""
    print(f"{watching}Ctrl-C stops it", flush=True)
    try:
        run(listener, watcher, settings)
    except KeyboardInterrupt:
        pass
    return exit_codes.OK
