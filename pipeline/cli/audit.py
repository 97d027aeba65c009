"""`imgpipe audit`: likely label errors over every image, scored out of sample over K folds by a
logistic regression on image embeddings or by K trainings (components/validation/label_audit.py),
recorded in ML Metadata beside the Examples it audited."""

from __future__ import annotations

import datetime
import logging
import os
import sys

from components.metadata_keys import AUDIT_EMBEDDINGS, AUDIT_METHODS, AUDIT_TRAINING
from data_prep.contract.config_error import ConfigError
from data_prep.runtime.terminal import terminal_safe
from pipeline import console, exit_codes
from pipeline.cli import options
from pipeline.cli.failures import describe_failure, report_failure

DEFAULT_FOLDS = 5
# Chosen by benchmarks/audit_bench.py: on photographs the embeddings found every flipped label,
# with no false suspect, in a third of the trainings' time; on handwritten digits, far from
# ImageNet's photos, they found more flips than the trainings but with more false suspects.
DEFAULT_METHOD = AUDIT_EMBEDDINGS
SHOWN_SUSPECTS = 5
AT_CHANCE_ADVICE = {
    AUDIT_EMBEDDINGS: "try --method training, or more images",
    AUDIT_TRAINING: "train them longer or on more images",
}  # the first few suspects on the console; the report has them all


def add_audit(subparsers) -> None:
    parser = subparsers.add_parser(
        "audit",
        parents=[options.config_options()],
        help="likely mislabelled images among ALL images: k-fold models, then cleanlab",
        description="Scores every image with a model that never trained on it, over K folds "
        "(near-duplicates always in one fold): with --method embeddings, a logistic regression "
        "per fold on each image's EfficientNet-Lite0 ImageNet embedding (weights shipped with "
        "imgpipe, no network); with --method training, K models trained by the pipeline's "
        "trainer (settings from --preset, --config and --set), each on K-1 folds. cleanlab "
        "then finds the likely label errors among all the out-of-sample probabilities. Audits "
        "the pipeline's newest ingest in the metadata store, or, with --data, ingests those "
        "images first as `imgpipe prep` does. Writes health.json (the shape of the pipeline's "
        "data health report) and eval_scores.npz under BUILD_DIR/audit/<UTC time>/ and records "
        "them in ML Metadata as a DataHealth made from the Examples. The training method costs K "
        "trainings: --preset runlocal (one epoch on small images) checks its path quickly. "
        "Exit status: "
        "0 done, "
        f"{exit_codes.BAD_INPUT} bad settings or too little data for the folds, "
        f"{exit_codes.COMPONENT_FAILED} the work failed. Arguments after '--' go to the "
        "ingest's Beam pipeline.",
    )
    parser.add_argument(
        "--folds",
        type=int,
        default=DEFAULT_FOLDS,
        metavar="K",
        help="models fitted, each holding out one fold (default: %(default)s)",
    )
    parser.add_argument(
        "--method",
        choices=AUDIT_METHODS,
        default=DEFAULT_METHOD,
        help="embeddings: logistic regression on pretrained image embeddings (seconds per "
        "fold); training: the pipeline's trainer per fold (default: %(default)s)",
    )
    options.store_flags(parser)
    parser.set_defaults(handler=_run_audit)


def _run_audit(args, beam_args: list[str]) -> int:
    try:
        config = options.effective_config(args, beam_args, generate_data=False).config
        if args.folds < 2:
            raise ConfigError("--folds", f"{args.folds} is below 2")
        target = options.store_target(args, default_sqlite=config.metadata_path)
        target.backend()  # one store named, MySQL credentials only with MySQL
    except ConfigError as error:
        print(f"imgpipe audit: error: {error}", file=sys.stderr)
        return exit_codes.BAD_INPUT
    build_dir = options.build_dir(args)
    log_path = console.run_log_path(build_dir, "audit")
    stamp = datetime.datetime.now(datetime.timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    report_dir = os.path.abspath(os.path.join(build_dir, "audit", f"{stamp}-{os.getpid()}"))
    health = failure = None
    with console.capture(log_path, args.verbose) as shown:
        shown.say(
            f"imgpipe audit: pipeline {config.name}, {args.folds} folds, {args.method}, "
            f"log {log_path}"
        )
        try:
            health, recorded = _audit(args, config, target, report_dir, beam_args, shown)
        except BaseException as error:  # noqa: BLE001 - each failure becomes one error line
            shown.stopped("stopped" if isinstance(error, KeyboardInterrupt) else "failed")
            logging.getLogger(__name__).exception("imgpipe audit failed")
            failure = _failure(error, shown.component)
    if failure:
        return report_failure("audit", failure, log_path)
    for line in summary_lines(health, report_dir):
        print(terminal_safe(line))
    print(f"ML Metadata: DataHealth {recorded} in {target.describe()}")
    print(f"full log: {log_path}")
    return exit_codes.OK


def _audit(args, config, target, report_dir: str, beam_args: list[str], shown):
    """The audited dataset (ingested first with --data), its audit and the record."""
    from ml_metadata.metadata_store import metadata_store
    from ml_metadata.proto import metadata_store_pb2 as mlmd_pb2

    from components.validation.label_audit import run_audit, run_embedding_audit
    from pipeline.validation import audit_record

    writable = target.connection_config(read_only=False)
    if args.data:
        outputs = _ingest(config, report_dir, beam_args, shown)
        if isinstance(writable, mlmd_pb2.ConnectionConfig) and writable.HasField("sqlite"):
            # A first audit makes the store, as a first run does.
            sqlite_dir = os.path.dirname(os.path.abspath(writable.sqlite.filename_uri))
            os.makedirs(sqlite_dir, exist_ok=True)
        store = metadata_store.MetadataStore(writable)
        dataset = audit_record.record_ingest(store, outputs, config.ingest)
    else:
        from data_prep.writing.plan import rejections_line

        dataset = audit_record.newest_ingest(target.open(), config.name)
        store = metadata_store.MetadataStore(writable)
        shown.say(f"  {rejections_line(dataset.data.ingest.get('rejected_per_reason', {}))}")

    def fold_started(index: int, images: int) -> None:
        if shown.component:
            shown.finished(shown.component)
        name = f"fold {index + 1} of {args.folds}"
        shown.started(name)
        shown.say(f"  {name}: {images} images held out, the others to train on")

    if args.method == AUDIT_TRAINING:
        health = run_audit(config.trainer, dataset.data, args.folds, report_dir, fold_started)
        if shown.component:
            shown.finished(shown.component)
    else:
        shown.started("embeddings")
        health = run_embedding_audit(dataset.data, args.folds, report_dir)
        shown.finished("embeddings")
    return health, audit_record.record_audit(store, dataset.examples_id, report_dir, health)


def _ingest(config, report_dir: str, beam_args: list[str], shown):
    """--data ingested as `imgpipe prep` does, into report_dir/ingest; its IngestOutputs."""
    from data_prep.ingest import IngestOutputs, run_ingest
    from data_prep.writing.plan import rejections_line

    outputs = IngestOutputs.under(os.path.join(report_dir, "ingest"))
    shown.started("ingest")
    report = run_ingest(config.ingest, outputs, beam_args)
    shown.finished("ingest")
    shown.say(f"  {rejections_line(report['rejected_per_reason'])}")
    return outputs


def _failure(error: BaseException, where: str | None) -> tuple[int, str]:
    """Too little data for the folds, or nothing to audit, is bad input; else as every command."""
    from data_prep.quality.folds import FoldError
    from pipeline.validation.audit_record import NothingToAudit

    if isinstance(error, (FoldError, NothingToAudit)):
        return exit_codes.BAD_INPUT, str(error)
    return describe_failure(error, where)


def summary_lines(health: dict, report_dir: str) -> list[str]:
    """The findings on one line by kind, one line per finding group, then the first suspects
    and where the report is."""
    from components.validation.data_health import HEALTH_FILE
    from data_prep.writing.plan import tally_line

    issues = health["label_issues"]
    near = health["near_duplicates"]
    audit = health["audit"]
    folds = (
        f"{audit['method']}, {audit['folds']} folds, held-out accuracy "
        f"{min(audit['held_out_accuracy']):.3f} to {max(audit['held_out_accuracy']):.3f}"
    )
    if audit.get("at_chance"):
        first = (
            f"likely mislabelled images: none listed of {health['eval_images_checked']}: the "
            "audit's models score at chance level (held-out accuracy "
            f"{audit['held_out_accuracy_overall']:.3f}, always answering the most common class"
            f" {audit['chance_accuracy']:.3f}; {folds}), so they cannot tell a wrong label; "
            + AT_CHANCE_ADVICE[audit["method"]]
        )
    else:
        first = (
            f"likely mislabelled images: {len(issues)} of {health['eval_images_checked']}, each "
            f"scored by a model that never trained on it ({folds})"
        )
    found = {
        "likely_mislabelled": len(issues),
        "near_duplicate_images": near["images"],
        "odd_images": health["odd_images"]["count"],
    }
    lines = [
        tally_line("found", found),
        first,
        f"near-duplicates: {near['clusters']} cluster(s), {near['images']} images "
        f"({near['fraction']:.1%})",
        f"odd images: {health['odd_images']['count']}",
    ]
    lines += [
        f"  {issue['path']}: labelled {issue['given']}, looks like {issue['predicted']} "
        f"({issue['confidence']:.2f})"
        for issue in issues[:SHOWN_SUSPECTS]
    ]
    lines.append(f"report: {os.path.join(report_dir, HEALTH_FILE)}")
    return lines
