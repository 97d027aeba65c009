"""`imgpipe prep` (raw images -> sharded TFRecords) and `imgpipe default-data`."""

from __future__ import annotations

import argparse
import logging
import re
import sys

from data_prep.contract.config_error import ConfigError
from data_prep.runtime.terminal import terminal_safe
from pipeline import console, exit_codes
from pipeline.cli import options
from pipeline.cli.failures import describe_failure, report_failure
from pipeline.config.loader import Override

_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([kmg]i?b?|b)?\s*$", re.IGNORECASE)
_UNITS = {"": 1, "b": 1, "k": 1024, "m": 1024**2, "g": 1024**3}


def parse_size(text: str) -> int:
    """'100MB', '512k', '2g' or plain bytes -> bytes (binary units)."""
    match = _SIZE.match(text)
    if not match:
        raise argparse.ArgumentTypeError(f"{text!r} is not a size like 100MB, 512KB or 1048576")
    number, unit = match.groups()
    return int(float(number) * _UNITS[(unit or "").lower()[:1]])


# The flags prep had before it took --config and --set: (flag, field, type, help). Each still
# works for one release, as an alias of its --set setting, with a notice.
ALIAS_FLAGS = (
    ("--eval-fraction", "ingest.eval_fraction", float, "share of images in the eval split"),
    ("--test-fraction", "ingest.test_fraction", float, "share of images in the test split"),
    ("--shard-size", "ingest.target_shard_bytes", "size", "target shard size, e.g. 100MB"),
    ("--max-reject-fraction", "ingest.max_reject_fraction", float, "rejected share that fails"),
    ("--max-side", "ingest.limits.max_side", int, "downscale images whose longer side is larger"),
    ("--max-pixels", "ingest.limits.max_pixels", int, "refuse images with more pixels"),
    ("--max-file-size", "ingest.limits.max_file_bytes", "size", "refuse larger files unread"),
    ("--files-per-bundle", "ingest.files_per_bundle", int, "files per Beam element"),
)


def add_prep(subparsers) -> None:
    parser = subparsers.add_parser(
        "prep",
        parents=[options.config_options()],
        help="raw images -> validated, deduplicated, sharded TFRecords (Apache Beam)",
        description=(
            "Ingests a folder of class folders (class = first-level folder) or a CSV/JSONL "
            "manifest "
            "(columns path,label[,split]) into gzip TFRecord shards under OUTPUT/Split-<split>/, "
            "with OUTPUT/label_map.json and OUTPUT/ingest_report.json, which accounts for every "
            "file as accepted, rejected (with a reason) or ignored. Its settings are the "
            "pipeline's ingest.* ones (--preset, --config, --set ingest.eval_fraction=0.1, ...); "
            "without --data it ingests the embedded dataset. Arguments after '--' go to "
            "Beam, e.g. '-- --runner=DataflowRunner --project=P --region=R "
            "--temp_location=gs://B/tmp'. Default: DirectRunner, one process, the per-file work in "
            "a forked child per core."
        ),
    )
    parser.add_argument("--output", required=True, help="output folder (local or Beam URI)")
    aliases = parser.add_argument_group(
        "older flags", "each an alias of --set FIELD=VALUE, going away in the next release"
    )
    for flag, field, kind, words in ALIAS_FLAGS:
        aliases.add_argument(
            flag,
            type=parse_size if kind == "size" else kind,
            metavar="SIZE" if kind == "size" else kind.__name__.upper(),
            help=f"{words}: --set {field}=VALUE",
        )
    parser.set_defaults(handler=_run_prep)


def _alias_overrides(args) -> list[Override]:
    """The older flags given, as overrides, each with a one-line notice on stderr."""
    overrides = []
    for flag, field, _, _ in ALIAS_FLAGS:
        value = getattr(args, flag[2:].replace("-", "_"))
        if value is not None:
            print(
                f"imgpipe prep: {flag} is now --set {field}={value}; {flag} goes away in the "
                "next release",
                file=sys.stderr,
            )
            overrides.append(Override.of(flag, field, value))
    return overrides


def _run_prep(args, beam_args: list[str]) -> int:
    from data_prep.ingest import IngestOutputs, run_ingest
    from data_prep.writing.plan import left_out_message, rejections_line

    failure = None
    try:
        loaded = options.effective_config(args, beam_args, True, _alias_overrides(args))
    except ConfigError as error:
        print(f"imgpipe prep: error: {error}", file=sys.stderr)
        return exit_codes.BAD_INPUT
    problem = options.named_input_problem(args, loaded)
    if problem:
        print(f"imgpipe prep: error: {problem}", file=sys.stderr)
        return exit_codes.BAD_INPUT
    config = loaded.config.ingest
    outputs = IngestOutputs.under(args.output)
    log_path = console.run_log_path(options.build_dir(args), "prep")
    with console.capture(log_path, args.verbose):
        try:
            report = run_ingest(config, outputs, list(loaded.config.beam_args))
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
    print(f"per split: {report['accepted_per_split']}")
    print(rejections_line(report["rejected_per_reason"]))
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
