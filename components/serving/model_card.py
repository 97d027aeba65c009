"""ModelCardGen: a model card for every evaluated model, and the files pushed beside it.

The card (model_card.json, and model_card.md for people) gathers what a reviewer needs in one
place: labels, input spec (read from the SavedModel's signatures), training data per class, TFMA
metrics with the thresholds and the baseline, the readable evaluation (per-class metrics), the
serving check, the TFLite comparison, the data's health (near-duplicates, odd images, likely
label errors), the trainer's own reports (every JSON file the Trainer wrote
at the top of its model run folder, read as-is), the ML Metadata ids of the model and its
examples, and package versions.

It runs before the Pusher, and its output folder holds exactly the files that go beside the
SavedModel in a pushed version: the Pusher stages them with the model and renames the whole
version into place at once, so nothing writes into a version a model server may be reading:
  <version>/model_card.json, model_card.md, tflite/*, evaluation/*
"""

import datetime
import html
import json
import os
from importlib import metadata

import tensorflow as tf
import tensorflow_model_analysis as tfma
from apache_beam.io.filesystems import FileSystems
from google.protobuf import json_format
from tfx.dsl.component.experimental.annotations import InputArtifact, OutputArtifact
from tfx.dsl.component.experimental.decorators import component
from tfx.types import artifact, artifact_utils, standard_artifacts
from tfx.utils import path_utils

from components import metadata_keys
from components.artifacts import DataHealth, EvaluationReport, IngestReport, ModelCard, TFLiteModel
from components.evaluation import evaluation_report
from components.evaluation.class_metrics import shown
from components.evaluation.evaluation_report_reader import small_eval_warning
from components.serving import serving_check, serving_probe, tflite_export
from components.serving.model_card_reader import (
    CARD_JSON,
    CARD_MARKDOWN,
    EVALUATION_DIR,
    TFLITE_DIR,
)
from components.training.serving_assets import read_label_names
from components.validation.data_health import HEALTH_FILE, read_health
from components.validation.data_health import counts as health_counts
from data_prep.ingest import IngestOutputs, read_ingest_report
from data_prep.runtime.terminal import terminal_safe

PACKAGES = (
    "imgpipe",
    "tensorflow",
    "tf-keras",
    "tfx",
    "tensorflow-transform",
    "tensorflow-model-analysis",
    "tensorflow-data-validation",
    "ml-metadata",
    "apache-beam",
    "tensorflow-serving-api",
)


def signature_spec(saved_model_dir: str) -> dict:
    """Each serving signature's inputs and outputs (dtype, shape; None = any size), read from
    saved_model.pb without loading the model."""
    signatures = serving_probe.saved_model_proto(saved_model_dir).meta_graphs[0].signature_def

    def tensors(infos) -> dict:
        return {
            name: {
                "dtype": tf.dtypes.as_dtype(info.dtype).name,
                "shape": [None if d.size < 0 else d.size for d in info.tensor_shape.dim],
            }
            for name, info in sorted(infos.items())
        }

    return {
        name: {"inputs": tensors(sig.inputs), "outputs": tensors(sig.outputs)}
        for name, sig in sorted(signatures.items())
        if not name.startswith("__")
    }


def tfma_summary(evaluation_uri: str) -> dict:
    """The candidate's and the baseline's metrics (overall, and per sub key where a metric has
    them), the thresholds, and whether validation passed."""
    config = tfma.load_eval_result(evaluation_uri).config
    models = {}
    for spec in config.model_specs:
        result = tfma.load_eval_result(evaluation_uri, model_name=spec.name)
        role = "baseline" if spec.is_baseline else "candidate"
        models[role] = _overall_slice_metrics(result.slicing_metrics)
    thresholds = [
        {"metric": metric.class_name, **json_format.MessageToDict(metric.threshold)}
        for metrics_spec in config.metrics_specs
        for metric in metrics_spec.metrics
        if metric.HasField("threshold")
    ]
    validation = tfma.load_validation_result(evaluation_uri)
    return {
        "candidate": models.get("candidate", {}),
        "baseline": models.get("baseline"),
        "thresholds": thresholds,
        "validation_ok": validation.validation_ok,
        "failures": [
            json_format.MessageToDict(failure)
            for per_slice in validation.metric_validations_per_slice
            for failure in per_slice.failures
        ],
    }


def _overall_slice_metrics(slicing_metrics) -> dict:
    """{'overall': {metric: value}, '<sub key>': {...}} of the whole-dataset slice; numbers only."""
    found = {}
    for slice_key, outputs in slicing_metrics:
        if slice_key:
            continue
        for sub_keys in outputs.values():
            for sub_key, metrics in sub_keys.items():
                values = {
                    name: value["doubleValue"]
                    for name, value in metrics.items()
                    if isinstance(value, dict) and "doubleValue" in value
                }
                if values:
                    found.setdefault(sub_key or "overall", {}).update(values)
    return found


def trainer_reports(model_run_uri: str) -> dict:
    """Every JSON file at the top of the Trainer's model run folder, by file name; a file that
    does not parse is reported as such rather than failing the card."""
    reports = {}
    for path in sorted(tf.io.gfile.glob(os.path.join(model_run_uri, "*.json"))):
        with tf.io.gfile.GFile(path) as handle:
            try:
                reports[os.path.basename(path)] = json.load(handle)
            except json.JSONDecodeError as error:
                reports[os.path.basename(path)] = {"unreadable": str(error)}
    return reports


def package_versions() -> dict[str, str | None]:
    versions = {}
    for name in PACKAGES:
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            versions[name] = None
    return versions


def _read_json(directory: str, name: str) -> dict:
    with tf.io.gfile.GFile(os.path.join(directory, name)) as handle:
        return json.load(handle)


def build_card(
    model: artifact.Artifact,
    model_run: artifact.Artifact,
    examples: artifact.Artifact,
    ingest_report: artifact.Artifact,
    evaluation: artifact.Artifact,
    model_blessing: artifact.Artifact,
    infra_blessing: artifact.Artifact,
    report: artifact.Artifact,
    tflite: artifact.Artifact,
    health: artifact.Artifact,
) -> dict:
    saved_model_dir = path_utils.serving_model_path(model.uri)
    readable = evaluation_report.read_report(report.uri)
    if readable is None:
        raise FileNotFoundError(f"no {evaluation_report.REPORT_FILE} in {report.uri}")
    tflite_report = _read_json(tflite.uri, tflite_export.REPORT_FILE)
    return {
        "created": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        # Written before the push: a pushed copy's version is the name of its folder.
        "model": {"mlmd_artifact_id": model.id, "uri": model.uri},
        "labels": read_label_names(saved_model_dir),
        "input_spec": {
            "signatures": signature_spec(saved_model_dir),
            "tflite": {"input": tflite_report["input"], "output": tflite_report["output"]},
        },
        "training_data": {
            "examples_mlmd_artifact_id": examples.id,
            "examples_uri": examples.uri,
            "splits": artifact_utils.decode_split_names(examples.split_names),
            "train_examples_per_class": train_examples_per_class(ingest_report),
            "eval_examples_per_class": {
                row["class"]: row["support"] for row in readable["per_class"]
            },
        },
        "metrics": {
            "tfma": tfma_summary(evaluation.uri),
            "per_class": readable["per_class"],
            "accuracy": readable["accuracy"],
            "macro_f1": readable["macro_f1"],
            "most_confused": readable["most_confused"],
            "misclassified_count": readable["misclassified_count"],
            "eval_warning": small_eval_warning(readable),
            # The held-out test split, when there is one: shown, never used for blessing.
            "test": readable.get("test"),
        },
        "blessings": {
            "evaluator": bool(model_blessing.get_int_custom_property("blessed")),
            "serving_check": bool(infra_blessing.get_int_custom_property("blessed")),
        },
        "serving_check": _read_json(infra_blessing.uri, serving_check.REPORT_FILE),
        "tflite": {
            "files": tflite_report["files"],
            "conversion_failed": tflite_report["conversion_failed"],
            "refused": tflite_report["refused"],
            "tensor_types": tflite_report["tensor_types"],
            "bytes": tflite_report["bytes"],
            "latency_ms": tflite_report["latency_ms"],
            "eval": tflite_report["eval"],
            "not_convertible": tflite_report["not_convertible"],
        },
        "data_health": data_health_summary(health),
        "trainer_reports": trainer_reports(model_run.uri),
        "package_versions": package_versions(),
    }


def data_health_summary(health: artifact.Artifact) -> dict:
    """The data's health as the card shows it: counts, flags per class and the label suspects
    (the artifact's health.json has the near-duplicate clusters' members)."""
    report = read_health(health.uri)
    if report is None:
        raise FileNotFoundError(f"no {HEALTH_FILE} in {health.uri}")
    return {
        "mlmd_artifact_id": health.id,
        **health_counts(report),
        "near_duplicate_fraction": report["near_duplicates"]["fraction"],
        "odd_images_per_class": report["odd_images"]["per_class"],
        "label_issues": report["label_issues"],
    }


def train_examples_per_class(ingest_report: artifact.Artifact) -> dict[str, int]:
    """Accepted train images per class, as the ingest counted them."""
    report = read_ingest_report(IngestOutputs.under(ingest_report.uri))
    return {name: splits.get("train", 0) for name, splits in report["accepted_per_class"].items()}


def card_markdown(card: dict) -> str:
    """A one-page summary of the card for people; the JSON has everything."""
    lines = [
        *_header_lines(card),
        *_input_lines(card["input_spec"]),
        *_class_lines(card["metrics"], card["training_data"]["train_examples_per_class"]),
        *_metric_lines(card["metrics"]),
        *_data_health_lines(card["data_health"]),
        *_serving_lines(card["serving_check"], card["tflite"]),
        "Package versions: "
        + ", ".join(f"{k} {v}" for k, v in card["package_versions"].items() if v),
        "",
    ]
    return "\n".join(_safe_line(part) for line in lines for part in line.split("\n"))


def _header_lines(card: dict) -> list[str]:
    """The title (the model's artifact), its examples and its blessings."""
    return [
        f"# Model card: MLMD artifact {card['model']['mlmd_artifact_id']}",
        "",
        f"Created {card['created']}. Examples: MLMD artifact "
        f"{card['training_data']['examples_mlmd_artifact_id']}. "
        f"Blessed by the Evaluator: {_yes(card['blessings']['evaluator'])}; "
        f"by the serving check: {_yes(card['blessings']['serving_check'])} "
        "(pushed only with both).",
        "",
    ]


def _input_lines(input_spec: dict) -> list[str]:
    """Each signature's inputs and outputs, and the TFLite model's input."""
    lines = ["## Inputs", ""]
    for name, signature in input_spec["signatures"].items():
        inputs = ", ".join(
            f"`{key}` {spec['dtype']} {spec['shape']}" for key, spec in signature["inputs"].items()
        )
        lines.append(f"- signature `{name}`: {inputs} → {', '.join(signature['outputs'])}")
    tflite_input = input_spec["tflite"]["input"]
    lines += [
        f"- TFLite (`tflite/`): `{tflite_input['name']}` float32 {tflite_input['shape']}, "
        f"{tflite_input['meaning']}; the int8 model takes them as uint8 and returns uint8 "
        "probabilities (scale and zero point in `tflite/tflite_report.json`)",
        "",
    ]
    return lines


def _class_lines(metrics: dict, train_counts: dict) -> list[str]:
    """A row per class: its examples in each split and its eval precision, recall and F1."""
    lines = [
        "## Classes (eval split)",
        "",
        "| class | train examples | eval examples | precision | recall | F1 |",
        "|---|---|---|---|---|---|",
    ]
    for row in metrics["per_class"]:
        lines.append(
            f"| {markdown_text(row['class'])} | {train_counts.get(row['class'], 0)} | "
            f"{row['support']} | "
            f"{shown(row['precision'])} | {shown(row['recall'])} | {shown(row['f1'])} |"
        )
    return lines


def _metric_lines(metrics: dict) -> list[str]:
    """TFMA's metrics against the baseline's, the thresholds, the verdict, the worst
    confusions."""
    tfma_metrics = metrics["tfma"]
    overall = tfma_metrics["candidate"].get("overall", {})
    baseline = (tfma_metrics["baseline"] or {}).get("overall", {})
    lines = ["", "## Metrics and thresholds", ""]
    for name, value in sorted(overall.items()):
        compared = f" (baseline {baseline[name]:.4f})" if name in baseline else ""
        lines.append(f"- {name}: {value:.4f}{compared}")
    lines.append(f"- macro F1: {shown(metrics['macro_f1'], 4)}")
    lines += held_out_lines(metrics.get("test"))
    if metrics.get("eval_warning"):
        lines.append(f"- **warning**: {metrics['eval_warning']}")
    for threshold in tfma_metrics["thresholds"]:
        rule = {key: value for key, value in threshold.items() if key != "metric"}
        lines.append(f"- threshold on {threshold['metric']}: `{json.dumps(rule)}`")
    lines.append(f"- validation passed: {_yes(tfma_metrics['validation_ok'])}")
    pairs = ", ".join(
        f"{markdown_text(pair['true'])} → {markdown_text(pair['predicted'])} ({pair['count']})"
        for pair in metrics["most_confused"]
    )
    lines += [
        f"- most confused (true → predicted): {pairs or 'none'}",
        f"- misclassified eval images: {metrics['misclassified_count']} "
        "(`evaluation/misclassified.csv`); confusion matrix: `evaluation/confusion_matrix.png`",
        "",
    ]
    return lines


def _serving_lines(check: dict, tflite: dict) -> list[str]:
    """The serving check's load time, latency and problems, and the TFLite models."""
    lines = ["## Serving", ""]
    if "latency_ms" in check:
        lines.append(
            f"- load {check['load_seconds']:.2f} s; single-image latency p50 "
            f"{check['latency_ms']['p50']:.2f} ms, p99 {check['latency_ms']['p99']:.2f} ms"
        )
    lines.extend(f"- problem: {problem}" for problem in check["problems"])
    refused = tflite["not_convertible"]
    lines += [
        *tflite_table(tflite),
        "",
        f"- not convertible to TFLite builtins: {', '.join(refused['ops']) or 'nothing'} "
        f"({refused['note']})",
        *(
            f"- TFLite {name} conversion failed on: {', '.join(ops)}"
            for name, ops in tflite["conversion_failed"].items()
        ),
        *(f"- TFLite {name} refused: {why}" for name, why in tflite["refused"].items()),
        "",
    ]
    return lines


def _safe_line(line: str) -> str:
    """Every line of the card, whatever fills it (a warning, a problem, a reason, a path): HTML
    shown as text, control characters as escapes. Names already passed through markdown_text
    hold no '<' or '>' any more, so nothing is escaped twice."""
    return terminal_safe(line).replace("<", "&lt;").replace(">", "&gt;")


def held_out_lines(test: dict | None) -> list[str]:
    """The held-out test split's figures, when there is one: reported, never decided on."""
    if test is None:
        return []
    return [
        f"- test accuracy: {test['accuracy']:.4f} on {test['examples']} held-out test images "
        f"(macro F1 {shown(test['macro_f1'], 4)}); reported only, the blessing is decided on "
        "the eval split"
    ]


def markdown_text(name: str) -> str:
    """A class name (a folder name: the user's data) as Markdown text: HTML in it is shown, not
    rendered; a control character is shown as an escape; a '|' does not split a table cell."""
    return html.escape(terminal_safe(name)).replace("|", "\\|")


def _data_health_lines(health: dict) -> list[str]:
    odd = ", ".join(
        f"{markdown_text(name)}: " + ", ".join(f"{flag} {n}" for flag, n in flags.items() if n)
        for name, flags in health["odd_images_per_class"].items()
        if any(flags.values())
    )
    lines = [
        "## Data health",
        "",
        f"- near-duplicate clusters: {health['near_duplicate_clusters']} "
        f"({health['near_duplicate_images']} images, {health['near_duplicate_fraction']:.1%}), "
        "each kept whole on one side of the split",
        f"- odd images (flagged, kept): {health['odd_images']}" + (f" ({odd})" if odd else ""),
        f"- likely label errors among {health['eval_images_checked']} eval images: "
        f"{health['label_issues']}",
    ]
    lines += [
        f"  - {markdown_text(issue['path'])}: given {markdown_text(issue['given'])}, predicted "
        f"{markdown_text(issue['predicted'])} ({issue['confidence']:.2f})"
        for issue in health["label_issues"][:10]
    ]
    return [*lines, ""]


def tflite_table(tflite: dict) -> list[str]:
    """Each converted TFLite model against the SavedModel on the eval split: accuracy, the gap
    in points, size, single-image latency on one thread, and the file (or why none)."""
    compared = tflite["eval"]
    lines = [
        "",
        f"TFLite models on the {compared['examples']} eval images (SavedModel accuracy "
        f"{compared['accuracy']['saved_model']:.4f}):",
        "",
        "| model | accuracy | points below the SavedModel | size (MiB) | latency p50 / p99 (ms) "
        "| file |",
        "|---|---|---|---|---|---|",
    ]
    for name, gap in compared["accuracy_gap_points"].items():
        latency = tflite["latency_ms"][name]
        file = f"`tflite/{tflite['files'][name]}`" if name in tflite["files"] else "refused"
        lines.append(
            f"| {name} | {compared['accuracy'][name]:.4f} | {gap:+.2f} | "
            f"{tflite['bytes'][name] / 2**20:.2f} | {latency['p50']:.2f} / "
            f"{latency['p99']:.2f} | {file} |"
        )
    return lines


def _yes(flag: bool) -> str:
    return "yes" if flag else "no"


def write_card(card: dict, directory: str) -> None:
    with FileSystems.create(os.path.join(directory, CARD_JSON)) as handle:
        handle.write(json.dumps(card, indent=2, default=str).encode())
    with FileSystems.create(os.path.join(directory, CARD_MARKDOWN)) as handle:
        handle.write(card_markdown(card).encode())


def copy_pushed_beside(
    tflite_dir: str, tflite_files: list[str], report_dir: str, directory: str
) -> None:
    """Copies the TFLite models and the readable evaluation into directory (the card's own
    folder), under the names they get beside a pushed SavedModel."""
    copies = [
        (tflite_dir, name, os.path.join(directory, TFLITE_DIR))
        for name in (*tflite_files, tflite_export.REPORT_FILE)
    ]
    copies += [
        (report_dir, name, os.path.join(directory, EVALUATION_DIR))
        for name in (
            evaluation_report.REPORT_FILE,
            evaluation_report.CONFUSION_PNG,
            evaluation_report.MISCLASSIFIED_CSV,
        )
    ]
    for source_dir, name, target_dir in copies:
        tf.io.gfile.makedirs(target_dir)
        tf.io.gfile.copy(os.path.join(source_dir, name), os.path.join(target_dir, name))


@component
def ModelCardGen(  # noqa: N802  TFX component names are classes
    model: InputArtifact[standard_artifacts.Model],
    model_run: InputArtifact[standard_artifacts.ModelRun],
    examples: InputArtifact[standard_artifacts.Examples],
    ingest_report: InputArtifact[IngestReport],
    evaluation: InputArtifact[standard_artifacts.ModelEvaluation],
    model_blessing: InputArtifact[standard_artifacts.ModelBlessing],
    infra_blessing: InputArtifact[standard_artifacts.InfraBlessing],
    readable_evaluation: InputArtifact[EvaluationReport],
    tflite: InputArtifact[TFLiteModel],
    data_health: InputArtifact[DataHealth],
    model_card: OutputArtifact[ModelCard],
) -> None:
    """Writes the model card, with the TFLite models and the evaluation beside it: the files
    the Pusher puts beside the SavedModel in the version it pushes."""
    card = build_card(
        model,
        model_run,
        examples,
        ingest_report,
        evaluation,
        model_blessing,
        infra_blessing,
        readable_evaluation,
        tflite,
        data_health,
    )
    write_card(card, model_card.uri)
    copy_pushed_beside(
        tflite.uri, list(card["tflite"]["files"].values()), readable_evaluation.uri, model_card.uri
    )
    model_card.set_int_custom_property(metadata_keys.MODEL_CARD_MODEL_ID_PROPERTY, model.id)
