"""`imgpipe schema`: the pipeline's decided data schema."""

from __future__ import annotations

import json
import sys

from data_prep.contract.config_error import ConfigError
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
    show = actions.add_parser(
        "show",
        parents=[options.store_options()],
        help="print it (every pipeline's in the store, or --pipeline's)",
    )
    show.set_defaults(handler=_run_schema, output=None)
    export = actions.add_parser(
        "export",
        parents=[options.store_options()],
        help="write it to a file (--pipeline when the store holds several)",
    )
    export.add_argument("output", help="the file to write (a text-format Schema proto)")
    export.set_defaults(handler=_run_schema)


def _run_schema(args, beam_args: list[str]) -> int:
    from ml_metadata import errors

    from components.metadata_keys import SCHEMA_FILE
    from data_prep.reading import file_access
    from pipeline.mlmd_connection import StoreNotFound
    from pipeline.validation.data_snapshot import decided_schema_uri, pipelines_in_store

    try:
        target = options.store_target(args)
        store = target.open()
        pipelines = [args.pipeline] if args.pipeline else pipelines_in_store(store)
        uris = {name: decided_schema_uri(store, name) for name in pipelines}
    except (ConfigError, StoreNotFound) as error:
        return _error(str(error))
    except errors.StatusError as error:
        return _error(f"{target.describe()}: {error}")
    decided = {name: uri for name, uri in uris.items() if uri}
    if not decided:
        which = f"pipeline {args.pipeline!r} has" if args.pipeline else "no pipeline in it has"
        held = f" (it holds {', '.join(pipelines)})" if pipelines and args.pipeline else ""
        return _error(f"{which} a schema yet{held}; a pipeline's first run decides it")
    texts = {
        name: file_access.read_bytes(f"{uri.rstrip('/')}/{SCHEMA_FILE}").decode()
        for name, uri in decided.items()
    }
    if args.output is not None:
        if len(texts) > 1:
            return _error(
                f"the store holds schemas of {', '.join(texts)}: name one with --pipeline"
            )
        ((name, text),) = texts.items()
        with open(args.output, "w") as handle:
            handle.write(text)
        print(f"schema of pipeline {name} written to {args.output}")
        return exit_codes.OK
    if args.json:
        print(json.dumps({name: _as_dict(text) for name, text in texts.items()}, indent=2))
        return exit_codes.OK
    for name, text in texts.items():
        if len(texts) > 1:
            print(f"# pipeline {name}")
        print(text, end="")
    return exit_codes.OK


def _as_dict(text: str) -> dict:
    """A text-format Schema as JSON-ready values (tensorflow_metadata's protos: no TensorFlow)."""
    from google.protobuf import json_format, text_format
    from tensorflow_metadata.proto.v0 import schema_pb2

    return json_format.MessageToDict(text_format.Parse(text, schema_pb2.Schema()))


def _error(message: str) -> int:
    print(f"imgpipe schema: error: {message}", file=sys.stderr)
    return exit_codes.BAD_INPUT
