"""`imgpipe predict`: top-k classes of image files with an exported model."""

from __future__ import annotations

import sys

from pipeline import exit_codes


def add_predict(subparsers) -> None:
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
    failed = any(isinstance(result, Failure) for result in results)
    return exit_codes.COMPONENT_FAILED if failed else exit_codes.OK
