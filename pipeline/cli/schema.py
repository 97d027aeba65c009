"""`imgpipe schema`: the pipeline's decided data schema."""

from __future__ import annotations

import sys

from data_prep.ingest_config import ConfigError
from pipeline import exit_codes
from pipeline.cli import options


def add_schema(subparsers) -> None:
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
    show = actions.add_parser("show", parents=[options.store_options()], help="print it")
    show.set_defaults(handler=_run_schema, output=None)
    export = actions.add_parser(
        "export", parents=[options.store_options()], help="write it to a file"
    )
    export.add_argument("output", help="the file to write (a text-format Schema proto)")
    export.set_defaults(handler=_run_schema)


def _run_schema(args, beam_args: list[str]) -> int:
    from apache_beam.io.filesystems import FileSystems

    from components.gate.curated_schema_gen import SCHEMA_FILE
    from pipeline.gate.data_snapshot import decided_schema_uri
    from pipeline.mlmd_connection import StoreNotFound
    from pipeline.pipeline_config import PipelineConfig

    pipeline = args.pipeline or PipelineConfig.name
    try:
        uri = decided_schema_uri(options.store_target(args).open(), pipeline)
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
