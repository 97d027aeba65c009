"""`imgpipe runs` and `imgpipe lineage`: questions answered from ML Metadata."""

from __future__ import annotations

import sys

from data_prep.contract.config_error import ConfigError
from data_prep.runtime.terminal import terminal_safe
from pipeline import exit_codes
from pipeline.cli import options


def add_runs(subparsers) -> None:
    store = options.store_options()
    parser = subparsers.add_parser(
        "runs",
        parents=[store],
        help="pipeline runs, newest first; `runs diff A B` compares two",
        description="Lists pipeline runs from ML Metadata, newest first: start, duration, status, "
        "whether each component ran or came from the cache, eval accuracy, blessing and push.",
    )
    parser.set_defaults(handler=_run_query, query="runs")
    diff = parser.add_subparsers(dest="runs_command").add_parser(
        "diff",
        parents=[options.store_options(defaults=False)],
        help="what differs between two runs",
        description="Compares two runs' settings, code fingerprint, data (input fingerprint, file "
        "and split counts), metrics, outcome, artifacts and component states. A run is named by "
        "its id, a unique prefix of it, `latest` or `latest~N` (N runs before the latest).",
    )
    diff.add_argument("run_a")
    diff.add_argument("run_b")
    diff.set_defaults(query="diff")


def add_lineage(subparsers) -> None:
    store = options.store_options()
    parser = subparsers.add_parser(
        "lineage",
        help="where a model came from; what was made from a dataset; who used an image",
        description="Follows ML Metadata events by their input/output names, never through the "
        "Evaluator's baseline into older models.",
    )
    kinds = parser.add_subparsers(dest="lineage_command", required=True)
    model = kinds.add_parser(
        "model",
        parents=[store],
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
        parents=[store],
        help="downstream of an Examples artifact: models trained on it, blessed, pushed",
    )
    examples.add_argument("examples", type=int, help="Examples artifact id")
    examples.set_defaults(handler=_run_query, query="examples")
    image = kinds.add_parser(
        "image",
        parents=[store],
        help="which datasets and models included an image (by path or content)",
        description="Searches each dataset's source index (written by the ingest) for the image's "
        "path and its sha256, so a renamed copy or a since-changed file is found too.",
    )
    image.add_argument("path", help="the image file, or its path relative to the input folder")
    image.set_defaults(handler=_run_query, query="image")
    predictions = kinds.add_parser(
        "predictions",
        parents=[store],
        help="which models scored an image, or which model wrote a predictions file",
        description="For an image: searches the predictions files `imgpipe predict --output` "
        "recorded for the image's path and its sha256, and names the model each was scored "
        "with. For a predictions file (CSV or JSON lines) that predict wrote: names the model "
        "that wrote it and the rows edited, added or removed since.",
    )
    predictions.add_argument("path", help="an image file, or a predictions file")
    predictions.set_defaults(handler=_run_query, query="predictions")


def _run_query(args, beam_args: list[str]) -> int:
    from ml_metadata import errors

    from pipeline import lineage, run_guard
    from pipeline.lineage import formatting as lineage_format
    from pipeline.mlmd_connection import StoreNotFound

    command = "runs" if args.query in ("runs", "diff") else "lineage"
    try:
        target = options.store_target(args)
        store = target.open()  # first: a missing or damaged store is named, never written
        if target.backend() == "sqlite":  # a local store: no dead run is left shown running
            run_guard.settle_orphans(target.sqlite or target.default_sqlite)
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
        elif args.query == "predictions":
            answer = lineage.predictions_file_lineage(store, args.path)
            text = lineage_format.format_predictions_file_lineage
            if answer is None:  # an image
                answer = lineage.predictions_lineage(store, args.path)
                text = lineage_format.format_predictions_lineage
        else:
            answer = lineage.image_lineage(store, args.path)
            text = lineage_format.format_image_lineage
    except (ConfigError, StoreNotFound, lineage.LineageError) as error:
        print(terminal_safe(f"imgpipe {command}: error: {error}"), file=sys.stderr)
        return exit_codes.BAD_INPUT
    except errors.StatusError as error:
        print(f"imgpipe {command}: error: {target.describe()}: {error}", file=sys.stderr)
        return exit_codes.BAD_INPUT
    print(lineage_format.to_json(answer) if args.json else terminal_safe(text(answer)))
    return exit_codes.OK
