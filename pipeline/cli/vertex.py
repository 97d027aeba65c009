"""`imgpipe compile-vertex`: the Vertex AI / Kubeflow Pipelines job spec."""

from __future__ import annotations

import os
import sys

from data_prep.contract.config_error import ConfigError
from pipeline import exit_codes
from pipeline.cli import options
from pipeline.config.loader import Override


def add_compile_vertex(subparsers) -> None:
    parser = subparsers.add_parser(
        "compile-vertex",
        parents=[options.config_options()],
        help="write the Vertex AI / Kubeflow Pipelines job spec (TFX KubeflowV2DagRunner)",
        description="Compiles the pipeline into a PipelineJob JSON for Vertex AI Pipelines or "
        "Kubeflow Pipelines v2; every component runs in IMAGE, built from "
        "pipeline/runners/Dockerfile. "
        "Compile once per data drop: --span numbers it (Vertex keeps its own ML Metadata). "
        "Arguments after '--' go to Beam for every Beam-based component, e.g. "
        "'-- --runner=DataflowRunner --project=P --region=R --temp_location=gs://B/tmp'. "
        "Needs the orchestrators environment (make compile-vertex).",
    )
    parser.add_argument("--pipeline-root", required=True, help="artifact root, e.g. gs://b/tfx")
    parser.add_argument("--image", required=True, help="container image the components run in")
    parser.add_argument("--span", type=int, default=1, help="this data drop's span")
    parser.add_argument(
        "--serving-dir",
        help="where blessed models are pushed (default: PIPELINE_ROOT-serving, beside the root)",
    )
    parser.add_argument(
        "--drift-baseline",
        help="the statistics the drift check compares the span with: the StatisticsGen output "
        "folder (holding Split-train/) of the data the blessed model was trained on; needed "
        "from span 2 on",
    )
    parser.add_argument("--output", default=os.path.join("build", "vertex", "imgpipe.json"))
    parser.set_defaults(handler=_run_compile_vertex)


def _run_compile_vertex(args, beam_args: list[str]) -> int:
    from pipeline.runners.vertex import compile_vertex, snapshot_for_vertex

    try:
        serving_dir = args.serving_dir or f"{args.pipeline_root.rstrip('/')}-serving"
        flags = [
            Override.of("--pipeline-root", "pipeline_root", args.pipeline_root),
            Override.of("--serving-dir", "serving_dir", serving_dir),
        ]
        config = options.effective_config(args, beam_args, True, flags).config
        data = config.ingest.input
        snapshot = snapshot_for_vertex(data, args.span)
        os.makedirs(os.path.dirname(os.path.abspath(args.output)), exist_ok=True)
        spec = compile_vertex(config, snapshot, args.image, args.output, args.drift_baseline)
    except (ConfigError, ValueError) as error:
        print(f"imgpipe compile-vertex: error: {error}", file=sys.stderr)
        return exit_codes.BAD_INPUT
    tasks = spec["pipelineSpec"]["root"]["dag"]["tasks"]
    print(f"{args.output}: {len(tasks)} tasks in {args.image}, pipeline root {args.pipeline_root}")
    print(f"data: {data} as span {snapshot.span}")
    if args.drift_baseline:
        print(f"drift check against: {args.drift_baseline}")
    return exit_codes.OK
