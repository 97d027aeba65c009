"""`imgpipe models list` and `imgpipe models rollback`: the versions of the serving folder, and
which one serves. Neither loads TensorFlow."""

from __future__ import annotations

import os
import sys

from data_prep.contract.config_error import ConfigError
from data_prep.runtime.terminal import terminal_safe
from pipeline import exit_codes
from pipeline.cli import options


def add_models(subparsers) -> None:
    parser = subparsers.add_parser(
        "models",
        help="the pushed versions, and a rollback to one of them",
        description="The numbered versions under <serving_dir>/<name>/ (the Pusher's folder of "
        "the settings: --build-dir, --config, --set) and which one serves.",
    )
    commands = parser.add_subparsers(dest="models_command", required=True)
    listing = commands.add_parser(
        "list",
        parents=[options.config_options()],
        help="versions with their state; * marks the one served",
        description="Every version folder, newest first: serving, kept, incomplete, or moved "
        "aside (`N.broken`, found changed after its push); a rollback's pin is shown.",
    )
    listing.set_defaults(handler=_run_models)
    rollback = commands.add_parser(
        "rollback",
        parents=[options.config_options()],
        help="serve VERSION instead of the highest one; --latest undoes it",
        description="Pins VERSION (a whole version under the serving folder) in a file there, "
        "so `imgpipe serve`, `imgpipe predict` and a running server serve it. Later runs still "
        "push their versions, but the pinned one serves until `imgpipe models rollback "
        "--latest` removes the pin.",
    )
    which = rollback.add_mutually_exclusive_group(required=True)
    which.add_argument("version", nargs="?", help="the version number to serve")
    which.add_argument(
        "--latest", action="store_true", help="remove the pin: the highest whole version serves"
    )
    rollback.set_defaults(handler=_run_models)


def _run_models(args, beam_args: list[str]) -> int:
    from pipeline.serving import rollback

    command = f"imgpipe models {args.models_command}"
    try:
        config = options.effective_config(args, beam_args, generate_data=False).config
        base = os.path.join(config.serving_dir, config.name)
        store = _store(config.metadata_path, read_only=args.models_command == "list")
        if args.models_command == "list":
            rows = rollback.list_versions(base)
            if store is not None:
                rows = rollback.with_accuracy(store, base, rows)
            print(terminal_safe(rollback.format_versions(base, rows)))
            return exit_codes.OK
        version = None if args.latest else args.version
        print(terminal_safe(rollback.roll_back(base, version)))
        if store is None:
            print(f"not recorded in ML Metadata: {config.metadata_path} holds no store")
        else:
            rollback.record_rollback(store, base, None if version is None else int(version))
    except (ConfigError, rollback.RollbackError) as error:
        print(terminal_safe(f"{command}: error: {error}"), file=sys.stderr)
        return exit_codes.BAD_INPUT
    return exit_codes.OK


def _store(metadata_path: str, read_only: bool):
    """The pipeline's SQLite store, None when there is none: a serving folder copied without
    its build folder still lists and rolls back."""
    from ml_metadata.metadata_store import metadata_store

    from pipeline.mlmd_connection import MlmdTarget

    if not os.path.isfile(metadata_path):
        return None
    target = MlmdTarget(sqlite=metadata_path)
    if read_only:
        return target.open()
    return metadata_store.MetadataStore(target.connection_config(read_only=False))
