"""`imgpipe ui` (the read-only web app over the store) and `imgpipe report` (one run's page as
a file)."""

from __future__ import annotations

import logging
import sys

from data_prep.contract.config_error import ConfigError
from pipeline import exit_codes
from pipeline.cli import options


def add_ui(subparsers) -> None:
    parser = subparsers.add_parser(
        "ui",
        parents=[options.store_options(answers=False)],
        help="a read-only local web app: runs, data, mistakes, training curves and lineage",
        description="Serves pages over the metadata store and the artifacts: the runs (select two "
        "to compare), each run (components, ingest report with rejected files, training curves, "
        "evaluation with the misclassified images, serving check, TFLite, model card) and a "
        "model's lineage as a graph, with an image search. It reads the data and ML Metadata "
        "only; marks on the likely label errors go to label-review.json beside a SQLite store, "
        "from which the page exports a corrected manifest. It has no login: it listens on "
        "127.0.0.1 unless told otherwise.",
    )
    parser.add_argument("--host", default="127.0.0.1", help="address to listen on")
    parser.add_argument("--port", type=int, default=8765, help="port (default: %(default)s)")
    parser.set_defaults(handler=_run_ui)


def _run_ui(args, beam_args: list[str]) -> int:
    import threading

    from werkzeug.serving import make_server

    from pipeline.cli.listening import ListenError, listen, reachability_warning
    from pipeline.mlmd_connection import StoreNotFound
    from pipeline.ui.app import create_app, warm_up
    from pipeline.ui.label_review import review_path_beside

    try:
        # Bound here, not by Werkzeug, which prints its own lines and exits when the port is taken.
        with listen(args.host, args.port) as listener:
            target = options.store_target(args)
            target.open()  # fail now, not at the first page, when the store is not there
            review = (  # beside a SQLite store; a server store has no folder of ours
                review_path_beside(target.sqlite or target.default_sqlite)
                if target.backend() == "sqlite"
                else None
            )
            app = create_app(target.open, target.describe(), args.host, review)
            server = make_server(args.host, args.port, app, threaded=True, fd=listener.fileno())
    except (ConfigError, StoreNotFound, ListenError) as error:
        print(f"imgpipe ui: error: {error}", file=sys.stderr)
        return exit_codes.BAD_INPUT
    warning = reachability_warning(
        "ui", args.host, "the UI has no login, so anyone who can reach it reads every run and image"
    )
    if warning:
        print(warning, file=sys.stderr)
    if not args.verbose:  # one line per request is the web server's log, not the user's
        logging.getLogger("werkzeug").setLevel(logging.WARNING)
    print(f"imgpipe ui: http://{args.host}:{server.port}/ over {target.describe()}")
    kept = f"; label reviews kept in {review}" if review else ""
    print(f"read-only{kept}; Ctrl-C stops it", flush=True)
    threading.Thread(target=warm_up, daemon=True).start()
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
    return exit_codes.OK


def add_report(subparsers) -> None:
    parser = subparsers.add_parser(
        "report",
        parents=[options.store_options(answers=False)],
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
    from pipeline.lineage.formatting import run_title
    from pipeline.mlmd_connection import StoreNotFound
    from pipeline.ui.report import write_report

    try:
        target = options.store_target(args)
        run = write_report(target.open(), args.run, args.output)
    except (ConfigError, StoreNotFound, LineageError) as error:
        print(f"imgpipe report: error: {error}", file=sys.stderr)
        return exit_codes.BAD_INPUT
    except errors.StatusError as error:
        print(f"imgpipe report: error: {target.describe()}: {error}", file=sys.stderr)
        return exit_codes.BAD_INPUT
    except OSError as error:
        print(f"imgpipe report: error: cannot write {args.output}: {error}", file=sys.stderr)
        return exit_codes.BAD_INPUT
    print(f"run {run_title(run)}: {args.output}")
    return exit_codes.OK
