"""`imgpipe run`: the pipeline on this machine, then the run's summary."""

from __future__ import annotations

import logging
import sys

from data_prep.config import ConfigError
from pipeline import console, exit_codes
from pipeline.cli import options
from pipeline.cli.failures import describe_failure, report_failure


def add_run(subparsers) -> None:
    parser = subparsers.add_parser(
        "run",
        parents=[options.config_options()],
        help="run the TFX pipeline locally (LocalDagRunner, Beam DirectRunner, SQLite MLMD)",
        description="Runs the pipeline on this machine: a line per component, progress of the "
        "ingest and of training, then the run's summary; everything else goes to a log under "
        "BUILD_DIR/logs/ (--verbose shows it live). Without --data it generates and uses the "
        "embedded default dataset. One run at a time per pipeline and store: a second one waits "
        "for the first (or, with --no-wait, fails at once with exit status 5). Exit status: "
        "0 pushed, 1 a component failed, 2 bad settings or input, 3 not pushed, 4 stopped by the "
        "data gate, 5 busy, 130 interrupted. Arguments after '--' go to Beam for every "
        "Beam-based component.",
    )
    parser.add_argument(
        "--no-wait",
        action="store_true",
        help="fail at once when another run of this pipeline holds the store",
    )
    options.store_flags(parser)
    parser.set_defaults(handler=_run_pipeline)


def _raise_interrupt(signum, frame):
    raise KeyboardInterrupt


def _run_pipeline(args, beam_args: list[str]) -> int:
    import json
    import signal

    try:
        config, settings = options.effective_config(args, beam_args, generate_data=True)
        store_target = options.store_target(args, default_sqlite=config.metadata_path)
        store_target.backend()  # one store named, MySQL credentials only with MySQL
    except ConfigError as error:
        print(f"imgpipe run: error: {error}", file=sys.stderr)
        return exit_codes.BAD_INPUT
    log_path = console.run_log_path(args.build_dir, "run")
    summary = failure = None
    previous_handler = signal.signal(signal.SIGTERM, _raise_interrupt)
    with console.capture(log_path, args.verbose) as shown:
        shown.say(f"imgpipe run: pipeline {config.name}, log {log_path}")
        try:
            from pipeline.local_runner import run_local

            summary = run_local(
                config,
                wait=not args.no_wait,
                on_wait=shown.say,
                config_file=None if settings is None else json.dumps(settings),
                store_target=store_target,
            )
        except BaseException as error:  # noqa: BLE001 - each failure becomes one error line
            shown.stopped("stopped" if isinstance(error, KeyboardInterrupt) else "failed")
            logging.getLogger(__name__).exception("imgpipe run failed")
            failure = describe_failure(error, shown.component)
        finally:
            signal.signal(signal.SIGTERM, previous_handler)
    if failure:
        return report_failure("run", failure, log_path)
    _print_summary(summary, config, args.build_dir, log_path, store_target.describe())
    return summary.exit_code


def _print_summary(summary, config, build_dir: str, log_path: str, store: str) -> None:
    """This run's summary (the components were shown live as they ran)."""
    from data_prep.plan import left_out_message

    print(f"run {summary.run_id} of pipeline {config.name}: {summary.status}")
    if summary.span is not None:
        news = "new data, ingested now" if summary.new_data else "unchanged input, from the cache"
        counts = ", ".join(f"{count} {name}" for name, count in summary.ingest_counts.items())
        print(f"data: span {summary.span} ({news}): {counts} files; {summary.ingest_report}")
        for name in summary.classes_left_out:
            print(f"data: {left_out_message(name)}")
    if summary.eval_accuracy is not None:
        print(f"eval accuracy: {summary.eval_accuracy:.4f} (threshold {config.min_accuracy})")
    if summary.blessed is not None:
        print(f"blessed: {'yes' if summary.blessed else 'no'}")
    _print_outcome(summary)
    if summary.training_performance:
        perf = summary.training_performance
        print(
            f"training: {perf['images_per_second']:.1f} images/s, step "
            f"{perf['step_time_seconds'] * 1000:.1f} ms, input wait "
            f"{perf['input_wait_share']:.0%}, {perf['precision']}, XLA {bool(perf['xla'])}, "
            f"{perf['replicas']} replica(s), {perf['retraces']} retrace(s)"
        )
    _print_model_reports(summary)
    print(f"ML Metadata: {store}; artifacts under {config.pipeline_root}")
    if summary.pushed_to:
        lineage = f"imgpipe lineage model --latest-pushed --build-dir {build_dir}"
        print(f"where the pushed model came from: {lineage}")
    from pipeline.ui.report import report_path

    print(f"run report (one HTML file): {report_path(config.pipeline_root, summary.run_id)}")
    print(f"full log: {log_path}")


def _print_outcome(summary) -> None:
    """Whether the run pushed a model, where, or why not (the one place the summary says so)."""
    print(f"pushed: {summary.pushed_to or 'no'}")
    if summary.not_pushed_reason:
        print(f"not pushed, stopped by the {summary.stopped_by}: {summary.not_pushed_reason}")
    if summary.baseline_skipped:
        print(f"baseline comparison skipped: {summary.baseline_skipped}")


def _print_model_reports(summary) -> None:
    """The serving check, the readable evaluation, TFLite and the model card of a run."""
    check = summary.serving_check
    if check is not None:
        verdict = "passed" if check["blessed"] else f"refused ({check.get('problems', '')})"
        timing = ""
        if "latency_p50_ms" in check:
            timing = (
                f"; load {check['load_seconds']:.2f} s, single-image latency "
                f"p50 {check['latency_p50_ms']:.1f} ms, p99 {check['latency_p99_ms']:.1f} ms"
            )
        print(f"serving check: {verdict}{timing}")
    evaluation = summary.evaluation
    if evaluation is not None:
        print(f"eval per class (precision / recall / F1), macro F1 {evaluation['macro_f1']:.3f}:")
        for row in evaluation["per_class"]:
            print(
                f"  {row['class']:<20} {row['precision']:.3f} / {row['recall']:.3f} / "
                f"{row['f1']:.3f}  ({row['support']} images)"
            )
        pairs = ", ".join(
            f"{p['true']} -> {p['predicted']} ({p['count']})" for p in evaluation["most_confused"]
        )
        print(f"most confused (true -> predicted): {pairs or 'none'}")
        print(
            f"misclassified eval images: {evaluation['misclassified_count']}; report, "
            f"confusion_matrix.png and misclassified.csv in {evaluation['uri']}"
        )
    if summary.tflite is not None:
        gaps = ", ".join(
            f"{name.split('_')[0]} {value:+.2f}"
            for name, value in sorted(summary.tflite.items())
            if name.endswith("_gap_points")
        )
        print(f"TFLite accuracy, points below the SavedModel on the eval split: {gaps}")
    if summary.model_card is not None:
        print(f"model card: {summary.model_card}")
