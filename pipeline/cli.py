"""The `imgpipe` command line: one subcommand per user task, each with --help."""

from __future__ import annotations

import argparse
import dataclasses
import logging
import os
import re
import sys

from data_prep.config import ConfigError, IngestConfig
from data_prep.image_validation import ImageLimits

_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([kmg]i?b?|b)?\s*$", re.IGNORECASE)
_UNITS = {"": 1, "b": 1, "k": 1024, "m": 1024**2, "g": 1024**3}


def parse_size(text: str) -> int:
    """'100MB', '512k', '2g' or plain bytes -> bytes (binary units)."""
    match = _SIZE.match(text)
    if not match:
        raise argparse.ArgumentTypeError(f"{text!r} is not a size like 100MB, 512KB or 1048576")
    number, unit = match.groups()
    return int(float(number) * _UNITS[(unit or "").lower()[:1]])


class _WorkerProgress(logging.Filter):
    """Keeps only imgpipe's own lines among the logs Beam's local workers forward, unwrapped."""

    _MESSAGE = re.compile(r'message: "(ingest[^"]*)"')

    def filter(self, record: logging.LogRecord) -> bool:
        found = self._MESSAGE.search(record.getMessage())
        if not found:
            return False
        record.msg, record.args = found.group(1), None
        return True


def _configure_logging(verbose: bool) -> None:
    logging.basicConfig(
        level=logging.INFO if verbose else logging.WARNING,
        format="%(asctime)s %(levelname)s %(message)s",
        datefmt="%H:%M:%S",
    )
    for name in ("data_prep", "pipeline", "components"):
        logging.getLogger(name).setLevel(logging.INFO)
    forwarded = logging.getLogger("apache_beam.runners.portability.local_job_service")
    forwarded.setLevel(logging.INFO)
    forwarded.addFilter(_WorkerProgress())


def _add_prep(subparsers) -> None:
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
            "--temp_location=gs://B/tmp'. Default: DirectRunner, one worker process per core."
        ),
    )
    parser.add_argument("--input", required=True, help="folder of class folders, or manifest")
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
    parser.set_defaults(handler=_run_prep)


def _run_prep(args, beam_args: list[str]) -> int:
    from data_prep.ingest import IngestFailed, IngestOutputs, run_ingest
    from data_prep.sources import SourceError

    config = IngestConfig(
        input=args.input,
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
    outputs = IngestOutputs.under(args.output)
    try:
        report = run_ingest(config, outputs, beam_args)
    except (ConfigError, SourceError, IngestFailed) as error:
        print(f"imgpipe prep: error: {error}", file=sys.stderr)
        return 2
    totals = report["totals"]
    print(
        f"{totals['found']} files: {totals['accepted']} accepted, {totals['rejected']} rejected, "
        f"{totals['ignored']} ignored"
    )
    print(
        f"per split: {report['accepted_per_split']}; rejected by reason: "
        f"{report['rejected_per_reason'] or 'none'}"
    )
    print(
        f"{len(report['shards'])} shards under {outputs.examples_dir}; "
        f"report: {outputs.report_path}; label map: {outputs.label_map_path}"
    )
    return 0


def _add_default_data(subparsers) -> None:
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
        return 2
    print(
        f"default dataset: {sum(counts.values())} images in {len(counts)} classes "
        f"under {args.output}"
    )
    return 0


def _add_run(subparsers) -> None:
    parser = subparsers.add_parser(
        "run",
        help="run the TFX pipeline locally (LocalDagRunner, Beam DirectRunner, SQLite MLMD)",
        description="Runs the pipeline on this machine and prints a summary of the run. Without "
        "--data it generates and uses the embedded default dataset. Arguments after '--' go to "
        "Beam for every Beam-based component.",
    )
    parser.add_argument("--data", help="folder of class folders or a manifest (default: embedded)")
    parser.add_argument("--preset", choices=["local", "full"], default="local")
    parser.add_argument("--build-dir", default="build", help="pipeline root, MLMD and models")
    parser.set_defaults(handler=_run_pipeline)


def _run_pipeline(args, beam_args: list[str]) -> int:
    from data_prep.default_dataset import generate_default_dataset
    from pipeline.config import PRESETS
    from pipeline.local_runner import run_local

    data = args.data
    if data is None:
        data = os.path.join(args.build_dir, "default_data")
        generate_default_dataset(data)
    config = PRESETS[args.preset](data, args.build_dir)
    if beam_args:
        config = dataclasses.replace(config, beam_args=(*config.beam_args, *beam_args))
    try:
        config.validate()
    except ConfigError as error:
        print(f"imgpipe run: error: {error}", file=sys.stderr)
        return 2
    summary = run_local(config)
    print(f"run {summary.run_id} of pipeline {config.name}")
    for component in summary.components:
        print(f"  {component.node:<24} {component.state:<7} {component.seconds:7.1f} s")
    if summary.span is not None:
        news = "new data, ingested now" if summary.new_data else "unchanged input, from the cache"
        print(f"data: span {summary.span} ({news})")
    if summary.eval_accuracy is not None:
        print(f"eval accuracy: {summary.eval_accuracy:.4f} (threshold {config.min_accuracy})")
    for class_id, metrics in summary.per_class.items():
        name = summary.class_names[class_id] if class_id < len(summary.class_names) else "?"
        scores = "  ".join(f"{key} {value:.3f}" for key, value in metrics.items())
        print(f"  class {class_id} {name:<20} {scores}")
    if summary.blessed is not None:
        print(f"blessed: {'yes' if summary.blessed else 'no'}")
    print(f"pushed: {summary.pushed_to or 'no'}")
    print(f"ML Metadata: {config.metadata_path}; artifacts under {config.pipeline_root}")
    return 0 if summary.pushed_to or summary.blessed is None else 3


def _add_compile_vertex(subparsers) -> None:
    parser = subparsers.add_parser(
        "compile-vertex",
        help="write the Vertex AI / Kubeflow Pipelines job spec (TFX KubeflowV2DagRunner)",
        description="Compiles the pipeline into a PipelineJob JSON for Vertex AI Pipelines or "
        "Kubeflow Pipelines v2; every component runs in IMAGE, built from pipeline/Dockerfile. "
        "Compile once per data drop: --span numbers it (Vertex keeps its own ML Metadata). "
        "Arguments after '--' go to Beam for every Beam-based component, e.g. "
        "'-- --runner=DataflowRunner --project=P --region=R --temp_location=gs://B/tmp'. "
        "Needs the orchestrators environment (make compile-vertex).",
    )
    parser.add_argument("--data", help="the input as the containers see it, e.g. gs://b/images")
    parser.add_argument("--pipeline-root", required=True, help="artifact root, e.g. gs://b/tfx")
    parser.add_argument("--image", required=True, help="container image the components run in")
    parser.add_argument("--span", type=int, default=1, help="this data drop's span")
    parser.add_argument(
        "--serving-dir", help="where blessed models are pushed (default: PIPELINE_ROOT/serving)"
    )
    parser.add_argument("--preset", choices=["local", "full"], default="local")
    parser.add_argument("--build-dir", default="build", help="where the embedded dataset goes")
    parser.add_argument("--output", default=os.path.join("build", "vertex", "imgpipe.json"))
    parser.set_defaults(handler=_run_compile_vertex)


def _run_compile_vertex(args, beam_args: list[str]) -> int:
    from data_prep.default_dataset import generate_default_dataset
    from pipeline.config import PRESETS
    from pipeline.vertex_runner import compile_vertex, snapshot_for_vertex

    data = args.data
    if data is None:
        data = os.path.join(args.build_dir, "default_data")
        generate_default_dataset(data)
    config = dataclasses.replace(
        PRESETS[args.preset](data, args.build_dir),
        pipeline_root=args.pipeline_root,
        serving_dir=args.serving_dir or f"{args.pipeline_root.rstrip('/')}/serving",
    )
    if beam_args:
        config = dataclasses.replace(config, beam_args=(*config.beam_args, *beam_args))
    try:
        config.validate()
        snapshot = snapshot_for_vertex(data, args.span)
    except (ConfigError, ValueError) as error:
        print(f"imgpipe compile-vertex: error: {error}", file=sys.stderr)
        return 2
    os.makedirs(os.path.dirname(os.path.abspath(args.output)), exist_ok=True)
    spec = compile_vertex(config, snapshot, args.image, args.output)
    tasks = spec["pipelineSpec"]["root"]["dag"]["tasks"]
    print(f"{args.output}: {len(tasks)} tasks in {args.image}, pipeline root {args.pipeline_root}")
    print(f"data: {data} as span {snapshot.span} ({len(snapshot.class_names)} classes)")
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="imgpipe", description="Image classification pipeline on TFX."
    )
    parser.add_argument("-v", "--verbose", action="store_true", help="log everything at INFO")
    subparsers = parser.add_subparsers(dest="command", required=True)
    _add_prep(subparsers)
    _add_default_data(subparsers)
    _add_run(subparsers)
    _add_compile_vertex(subparsers)
    return parser


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    beam_args = []
    if "--" in argv:
        split = argv.index("--")
        argv, beam_args = argv[:split], argv[split + 1 :]
    args = build_parser().parse_args(argv)
    _configure_logging(args.verbose)
    return args.handler(args, beam_args)


if __name__ == "__main__":
    sys.exit(main())
