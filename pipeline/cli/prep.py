"""`imgpipe prep` (raw images -> sharded TFRecords) and `imgpipe default-data`."""

from __future__ import annotations

import argparse
import dataclasses
import logging
import re
import sys

from data_prep.ingest_config import ConfigError, IngestConfig
from data_prep.reading.image_validation import ImageLimits
from data_prep.runtime.terminal import terminal_safe
from pipeline import console, exit_codes
from pipeline.cli.failures import describe_failure, report_failure

_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([kmg]i?b?|b)?\s*$", re.IGNORECASE)
_UNITS = {"": 1, "b": 1, "k": 1024, "m": 1024**2, "g": 1024**3}


def parse_size(text: str) -> int:
    """'100MB', '512k', '2g' or plain bytes -> bytes (binary units)."""
    match = _SIZE.match(text)
    if not match:
        raise argparse.ArgumentTypeError(f"{text!r} is not a size like 100MB, 512KB or 1048576")
    number, unit = match.groups()
    return int(float(number) * _UNITS[(unit or "").lower()[:1]])


def add_prep(subparsers) -> None:
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
            "--temp_location=gs://B/tmp'. Default: DirectRunner, one process, the per-file work in "
            "a forked child per core."
        ),
    )
    parser.add_argument("--data", required=True, help="folder of class folders, or manifest")
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
    from data_prep.writing.plan import left_out_message

    failure = None
    config = IngestConfig(
        input=args.data,
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
            failure = describe_failure(error, "the ingest")
    if failure:
        return report_failure("prep", failure, log_path)
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
        print(terminal_safe(left_out_message(name)))
    print(
        f"{len(report['shards'])} shards under {outputs.examples_dir}; "
        f"report: {outputs.report_path}; label map: {outputs.label_map_path}"
    )
    print(f"log: {log_path}")
    return exit_codes.OK


def add_default_data(subparsers) -> None:
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
