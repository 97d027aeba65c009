"""`imgpipe config show`: the effective settings as a config file."""

from __future__ import annotations

import json
import sys

from data_prep.contract.config_error import ConfigError
from pipeline import exit_codes
from pipeline.cli import options


def add_config(subparsers) -> None:
    parser = subparsers.add_parser(
        "config",
        help="the effective settings: `config show` prints every field as a config file",
    )
    show = parser.add_subparsers(dest="config_command", required=True).add_parser(
        "show",
        parents=[options.config_options()],
        help="print the effective config (preset, --config, --set) with its defaults, as YAML",
        description="Prints every field of the effective pipeline config as a YAML file that "
        "`--config` reads back to the same config. Flags (--data, --build-dir, --set) beat the "
        "config file, which beats the preset.",
    )
    show.add_argument(
        "--origins",
        action="store_true",
        help="print each field, its value and where it came from (preset, config file, a flag "
        "or --set) instead of a config file",
    )
    show.set_defaults(handler=_run_config_show)


def _run_config_show(args, beam_args: list[str]) -> int:
    from pipeline.config import config_file

    try:
        loaded = options.effective_config(args, beam_args, generate_data=False)
    except ConfigError as error:
        print(f"imgpipe config: error: {error}", file=sys.stderr)
        return exit_codes.BAD_INPUT
    if not args.origins:
        print(config_file.dump(loaded.config), end="")
        return exit_codes.OK
    values = config_file.flatten(config_file.to_settings(loaded.config))
    width = max(len(field) for field in values)
    for field, value in values.items():
        origin = loaded.origins.get(field, f"preset {args.preset}")
        print(f"{field:<{width}}  {json.dumps(value)}  ({origin})")
    return exit_codes.OK
