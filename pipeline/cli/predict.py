"""`imgpipe predict`: top-k classes of image files, folders and manifests with an exported model,
as a table or a CSV/JSONL file recorded in ML Metadata."""

from __future__ import annotations

import collections
import os
import sys

from pipeline import exit_codes
from pipeline.cli import options
from pipeline.cli.failures import describe_failure


def add_predict(subparsers) -> None:
    parser = subparsers.add_parser(
        "predict",
        help="top-k classes of image files, folders and manifests with an exported model",
        description="Classifies images with a SavedModel exported by the pipeline: by default "
        "the newest pushed model of the store under --build-dir. Takes files, folders (every "
        "file below them) and manifests (the ingest's CSV or JSON lines; labels optional). "
        "Files go through the ingest's validation and conversion, so every format the ingest "
        "accepts works (JPEG, PNG, WebP, TIFF, BMP, GIF, grayscale, EXIF-rotated); a file the "
        "ingest would reject gets its reason, and the exit status is 1, while the others are "
        "still answered. Prints a table, or with --output writes one row per file and records "
        "the file in ML Metadata (`imgpipe lineage predictions FILE`). Beam options go after "
        "`--`, as for `imgpipe run`.",
    )
    parser.add_argument(
        "inputs", nargs="*", metavar="FILE", help="image files, folders or manifests"
    )
    parser.add_argument(
        "--data",
        action="append",
        default=[],
        metavar="FOLDER|MANIFEST",
        help="a folder or manifest to score (repeatable), as FILE",
    )
    parser.add_argument(
        "--model",
        help="SavedModel folder or Pusher base folder (default: the newest pushed model "
        "recorded in the metadata store)",
    )
    parser.add_argument("--top-k", type=int, default=3, help="classes per file (default: 3)")
    parser.add_argument(
        "--min-confidence",
        type=float,
        default=0.5,
        metavar="P",
        help="mark predictions whose top probability is below P as low confidence (default: 0.5)",
    )
    parser.add_argument(
        "--output",
        metavar="FILE.csv|FILE.jsonl",
        help="write one row per file (file, status, top class, probability, low confidence, "
        "top-k, model version, reason) instead of the table",
    )
    parser.add_argument(
        "--explain",
        metavar="FOLDER",
        help="also write a Grad-CAM overlay (PNG) of each scored image's top class into FOLDER, "
        "named <file name>-<first 8 hex digits of its sha256>.png",
    )
    options.store_flags(parser)
    parser.add_argument("--build-dir", default="build", help="as for `imgpipe run`")
    parser.set_defaults(handler=_run_predict)


def _run_predict(args, beam_args: list[str]) -> int:
    from ml_metadata import errors

    from data_prep.reading.sources import SourceError
    from pipeline.predictions_file import check_output_path

    inputs = [*args.inputs, *args.data]
    try:
        if not inputs:
            raise ValueError("name files, folders or manifests to score (FILE or --data)")
        if args.output:
            check_output_path(args.output, inputs)
            if "://" not in args.output:  # a bare name is a file in this folder
                args.output = os.path.abspath(args.output)
        target = options.store_target(args)
        model_dir, model_id = _model(args, target)
        rows = _score(args, inputs, model_dir, beam_args)
    except (LookupError, OSError, ValueError, SourceError) as error:
        print(f"imgpipe predict: error: {error}", file=sys.stderr)
        return exit_codes.BAD_INPUT
    except errors.StatusError as error:
        print(f"imgpipe predict: error: {target.describe()}: {error}", file=sys.stderr)
        return exit_codes.BAD_INPUT
    except Exception as error:  # noqa: BLE001  one line, never a traceback
        code, message = describe_failure(error, None)
        print(f"imgpipe predict: error: {message}", file=sys.stderr)
        return code
    for row in rows:
        if row.status != "scored":
            why = ": ".join(part for part in (row.status, row.reason, row.detail) if part)
            print(f"imgpipe predict: {row.shown_file}: {why}", file=sys.stderr)
    if args.output:
        print(_summary(rows, args.output, args.min_confidence))
    else:
        print(_table(rows))
    try:
        labelled = _labelled(rows, model_dir)
        if args.output:
            _record(args, target, model_dir, model_id, inputs, rows, labelled)
        if args.explain:
            written, kept = _explain(rows, model_dir, args.explain)
            there = f" ({len(kept)} already there, kept)" if kept else ""
            print(f"Grad-CAM overlays: {len(written)} in {args.explain}{there}")
    except Exception as error:  # noqa: BLE001  one line, never a traceback
        code, message = describe_failure(error, None)
        print(f"imgpipe predict: error: {message}", file=sys.stderr)
        return code
    rejected = any(row.status == "rejected" for row in rows)
    return exit_codes.COMPONENT_FAILED if rejected else exit_codes.OK


def _model(args, target) -> tuple[str, int | None]:
    """The model folder to load and its artifact id in the store (None when not recorded)."""
    from pipeline.lineage.store import LineageError
    from pipeline.mlmd_connection import StoreNotFound, resolve_uri
    from pipeline.serving.predict import resolve_model_dir
    from pipeline.serving.predictions_record import model_artifact_id, newest_pushed_model

    if args.model is None:
        try:
            artifact_id, destination = newest_pushed_model(target.open())
        except (StoreNotFound, LineageError) as error:
            raise LookupError(f"{error}; name a model with --model") from error
        if target.backend() == "sqlite":  # a store written before paths were recorded absolute
            store_file = os.path.abspath(target.sqlite or target.default_sqlite)
            destination = resolve_uri(destination, os.path.dirname(store_file))
        return destination, artifact_id
    model_dir = resolve_model_dir(args.model)  # a Pusher's base folder: its newest version
    try:
        store = target.open()
    except StoreNotFound:
        return model_dir, None
    return model_dir, model_artifact_id(store, model_dir)


def _score(args, inputs: list[str], model_dir: str, beam_args: list[str]):
    from pipeline.serving.predict import predict
    from pipeline.serving.scoring import PredictSettings

    settings = PredictSettings(top_k=args.top_k, min_confidence=args.min_confidence)
    return predict(inputs, model_dir, settings, args.output, tuple(beam_args))


def _explain(rows, model_dir: str, folder: str) -> tuple[list[str], list[str]]:
    from data_prep.reading.image_validation import ImageLimits
    from pipeline.serving.predict import write_explanations

    return write_explanations(rows, model_dir, folder, ImageLimits())


def _labelled(rows, model_dir: str):
    """Scores the labelled rows against their labels and prints the figures; None (nothing
    printed) when no scored file has a label."""
    from components.training.serving_assets import read_label_names
    from pipeline.serving.labelled import format_labelled, score_labelled

    score = score_labelled(rows, read_label_names(model_dir))
    if score is not None:
        print("\n".join(format_labelled(score)))
    return score


def _record(args, target, model_dir: str, model_id: int | None, inputs, rows, labelled) -> None:
    from ml_metadata.metadata_store import metadata_store

    from pipeline.serving.predictions_record import record_predictions

    if model_id is None:
        print(
            f"imgpipe predict: {args.output} is not recorded in ML Metadata: {model_dir} is no "
            f"model of {target.describe()}",
            file=sys.stderr,
        )
        return
    store = metadata_store.MetadataStore(target.connection_config(read_only=False))
    record_predictions(store, model_id, args.output, rows, inputs, args.min_confidence, labelled)


def _table(rows) -> str:
    """The scored files, a line each: file, top class, probability, the top-k, a low-confidence
    mark; columns aligned."""
    cells = [
        (
            row.shown_file,
            row.top_class,
            f"{row.probability:.3f}",
            ", ".join(f"{name} {probability:.3f}" for name, probability in row.top_k),
            "low confidence" if row.low_confidence else "",
        )
        for row in rows
        if row.status == "scored"
    ]
    if not cells:
        return "no file scored"
    cells.insert(0, ("file", "class", "prob", "top-k", ""))
    widths = [max(len(line[i]) for line in cells) for i in range(len(cells[0]))]
    return "\n".join(
        "  ".join(cell.ljust(width) for cell, width in zip(line, widths, strict=True)).rstrip()
        for line in cells
    )


def _summary(rows, output: str, min_confidence: float) -> str:
    counts = collections.Counter(row.status for row in rows)
    low = sum(row.low_confidence for row in rows)
    versions = sorted({row.model_version for row in rows if row.model_version})
    return (
        f"{output}: {len(rows)} files, {counts['scored']} scored ({low} below "
        f"{min_confidence:g} confidence), {counts['rejected']} rejected, {counts['ignored']} "
        f"ignored; model {', '.join(versions) or '-'}"
    )
