"""DataGate: stops a span before Transform when it breaks the schema, drifted from the data the
blessed model was trained on, or changed the class set against the policy.

ExampleValidator and DistributionValidator only record anomalies; on their own they never fail a
run. The gate reads both, and the span's label map from the ingest report, and fails with one
message naming every problem (feature, what was measured, the threshold). The message is the
execution's result in ML Metadata, so the run record says why nothing trained; a launcher that
reads no execution result (TFX's legacy one under Airflow, Kubeflow V2's container entrypoint on
Vertex) gets it as a SpanStopped exception, which fails the task so nothing downstream runs. A
passing gate writes a DataVerdict artifact that records an allowed class change (the Evaluator
then has no baseline, see pipeline/validation/baseline_strategy.py), every image size and
brightness distance it measured against its threshold and the classes it measured them on
(components/validation/class_drift.py; size_drift.py where the baseline data's counts are not
per class).
"""

from __future__ import annotations

import dataclasses
import json
import math
import re

from apache_beam.io.filesystems import FileSystems
from tensorflow_data_validation import FeaturePath
from tensorflow_metadata.proto.v0 import anomalies_pb2
from tfx import types
from tfx.components.statistics_gen import stats_artifact_utils
from tfx.dsl.components.base import base_component, base_executor, executor_spec
from tfx.proto.orchestration import execution_result_pb2
from tfx.types import artifact, artifact_utils, component_spec, standard_artifacts

from components import metadata_keys
from components.artifacts import DataVerdict, IngestReport
from components.ingest.ingest_report_reader import IngestReportRecord
from components.validation.class_drift import counts_per_class, shared_class_distances
from components.validation.drift_record import METRIC, ClassScope, Distance
from components.validation.size_drift import SIZE_FEATURES, share_distance
from data_prep.contract import features
from data_prep.contract.label_map import class_change, names_by_id
from data_prep.writing.ingest_outputs import BRIGHTNESS

ANOMALIES_FILE = "SchemaDiff.pb"  # what ExampleValidator and DistributionValidator write
ANOMALIES_KEY = "anomalies"  # ExampleValidator's: the span against the schema
DRIFT_KEY = "drift_anomalies"  # DistributionValidator's: the span against the baseline data
INGEST_REPORT_KEY = "ingest_report"
STATISTICS_KEY = "statistics"  # StatisticsGen's: the span's
BASELINE_KEY = "baseline_statistics"  # the blessed model's training data's
BASELINE_INGEST_REPORT_KEY = "baseline_ingest_report"  # the same data's ingest report
DRIFT_SPLIT_KEY = "drift_split"
IMAGE_SIZE_SHARE_KEY = "image_size_share"
BRIGHTNESS_SHARE_KEY = "brightness_share"
VERDICT_KEY = metadata_keys.DATA_VERDICT_OUTPUT_KEY
REFERENCE_LABEL_MAP_KEY = "reference_label_map"
ALLOW_CLASS_CHANGES_KEY = "allow_class_changes"
PIPELINE_KEY = "pipeline"  # not "pipeline_name": TFX's legacy launcher reserves that name
MAX_NEAR_DUPLICATE_FRACTION_KEY = "max_near_duplicate_fraction"
STOPPED_CODE = 9  # the ExecutionResult code of a stopped span (gRPC's FAILED_PRECONDITION)
# The gate setting each drift-checked feature's threshold comes from (pipeline/factory.py
# drift_config), and the distance in a validator's description.
_DRIFT_SETTINGS = {
    features.LABEL_NAME: "gate.class_distribution_linf",
    features.IMAGE_FORMAT: "gate.image_format_linf",
}
# The gate setting of each share-of-images distance, named with the one that lets a span through.
_SHARE_SETTINGS = {
    **dict.fromkeys(SIZE_FEATURES, "gate.image_size_share"),
    BRIGHTNESS: "gate.brightness_share",
}
_MEASURED = re.compile(r" is ([0-9.eE+-]+) \(up to six significant digits\), above the threshold")


class SpanStopped(RuntimeError):
    """The gate stopped the span; the message says why (one line per problem)."""


def describe_anomalies(anomalies: artifact.Artifact) -> list[tuple[str, str]]:
    """(feature, line) per anomaly reason; the line names split, feature and the validator's
    description (for drift: the metric, the measured distance and the threshold).

    ExampleValidator writes Split-<split>/, DistributionValidator SplitPair-<split>_<baseline
    split>/ (it clears the top-level descriptions and keeps the reasons); without a baseline it
    writes nothing.
    """
    found = []
    for split in artifact_utils.decode_split_names(anomalies.split_names):
        folder = FileSystems.join(anomalies.uri, f"Split-{split}")
        if not FileSystems.exists(folder):
            folder = FileSystems.join(anomalies.uri, f"SplitPair-{split}")
        with FileSystems.open(FileSystems.join(folder, ANOMALIES_FILE)) as handle:
            parsed = anomalies_pb2.Anomalies.FromString(handle.read())
        infos = sorted(parsed.anomaly_info.items())
        if parsed.HasField("dataset_anomaly_info"):
            infos.append(("(dataset)", parsed.dataset_anomaly_info))
        for feature, info in infos:
            reasons = [(r.short_description, r.description) for r in info.reason] or [
                (info.short_description, info.description)
            ]
            for short, description in reasons:
                found.append((feature, f"{split}: feature '{feature}': {short}: {description}"))
    return found


def class_problem(
    reference: dict[str, int], label_map: dict[str, int], allow_changes: bool, pipeline: str
) -> str | None:
    """Why the span's classes stop it, or None. New classes pass only when allowed; a gone class
    always stops (ids never change meaning, and no data would train its output), naming the
    setting that trains the remaining classes as a pipeline of their own."""
    change = class_change(reference, label_map)
    if not reference or not change or (allow_changes and not change.removed):
        return None
    new_name = re.sub(
        r"[^a-z0-9_-]+", "-", f"{pipeline}-without-{'-'.join(change.removed)}".lower()
    )
    hint = (
        "put its images back, or train the classes left as a new pipeline: "
        f"--set name={new_name[:63]}"
        if change.removed
        else "to train a model with the new head: --set gate.allow_class_changes=true"
    )
    return (
        f"classes: {change.describe()} against the pipeline's classes "
        f"({', '.join(names_by_id(reference))}); {hint}"
    )


def let_through(feature: str, line: str) -> str:
    """The --set that lets a drifted span through, as a clause to append to the drift line; ''
    when the line names no measured distance."""
    found = _MEASURED.search(line)
    if feature not in _DRIFT_SETTINGS or not found:
        return ""
    return _raised_to(_DRIFT_SETTINGS[feature], float(found.group(1)))


def _raised_to(setting: str, measured: float) -> str:
    """The clause setting a threshold to the measured distance, rounded up to hundredths."""
    threshold = min(1.0, math.ceil(measured * 100 - 1e-9) / 100)
    return f"; to let this span through: --set {setting}={threshold:g}"


def near_duplicate_problem(fraction: float | None, limit: float) -> str | None:
    """Why the share of images in near-duplicate clusters stops the span, or None."""
    if fraction is None or fraction <= limit:
        return None
    return (
        f"near-duplicates: {fraction:.1%} of the distinct images are in near-duplicate clusters "
        f"> gate.max_near_duplicate_fraction {limit:.1%}; the ingest report lists them under "
        "near_duplicates"
    )


def size_distances(
    statistics: artifact.Artifact,
    baseline: artifact.Artifact,
    split: str,
    thresholds: dict[str, float],
) -> list[Distance]:
    """Each image size feature's share distance between the span's and the baseline's split,
    over the whole split, from their statistics."""
    current, previous = (
        stats_artifact_utils.load_statistics(a, split).get_default_slice_or_die()
        for a in (statistics, baseline)
    )
    found = []
    for name in SIZE_FEATURES:
        sides = [s.get_feature(FeaturePath([name])).proto() for s in (current, previous)]
        sizes = (side.num_stats.common_stats.num_non_missing for side in sides)
        found.append(Distance(name, share_distance(*sides), thresholds[name], *sizes))
    return found


def drift_distances(
    reports: tuple[artifact.Artifact, artifact.Artifact | None],
    statistics: tuple[artifact.Artifact, artifact.Artifact | None],
    split: str,
    thresholds: dict[str, float],
) -> tuple[list[Distance], ClassScope | None]:
    """The image size and brightness distances (thresholds: feature -> threshold) between the
    span's split and the baseline data's (reports, statistics: the span's and the baseline's),
    and the classes they were measured on: those both share where both ingest reports count
    their images per class, else the whole split's sizes from the statistics. Nothing without
    a baseline (the first span)."""
    if statistics[1] is None:
        return [], None
    current, previous = (
        None if a is None else _read_json(IngestReportRecord.read(a.mlmd_artifact).report_path)
        for a in reports
    )
    if previous is not None and counts_per_class(current) and counts_per_class(previous):
        return shared_class_distances(current, previous, split, thresholds)
    why = (
        "no ingest report of the baseline data"
        if previous is None
        else "an ingest report without counts per class"
    )
    return size_distances(*statistics, split, thresholds), ClassScope(whole_split=why)


def _read_json(path: str) -> dict:
    with FileSystems.open(path) as handle:
        return json.loads(handle.read())


def share_problem(distance: Distance, split: str, scope: ClassScope) -> str | None:
    """Why a share-of-images distance (image size, brightness) stops the span, on which classes,
    with the setting that lets it through, or None."""
    if distance.passed:
        return None
    return (
        f"drift: {split}: feature '{distance.feature}': {METRIC} is {distance.distance:.3f} "
        f"({scope.describe()}), above the threshold {distance.threshold:g}"
        + (
            f" and the noise floor {distance.floor:.2f} of {distance.images} against "
            f"{distance.baseline_images} images"
            if distance.floor > distance.threshold
            else ""
        )
        + _raised_to(_SHARE_SETTINGS[distance.feature], distance.distance)
    )


def gate_problems(
    anomalies: artifact.Artifact,
    drift: artifact.Artifact | None,
    label_map: dict[str, int],
    reference: dict[str, int],
    allow_class_changes: bool,
    pipeline: str,
) -> list[str]:
    """Every reason to stop the span, one line each. Under an allowed class change the class
    shares' drift is expected (a new class's share is its distance), so it is not a problem."""
    classes = class_problem(reference, label_map, allow_class_changes, pipeline)
    allowed_change = bool(reference) and not classes and bool(class_change(reference, label_map))
    problems = [f"schema: {line}" for _, line in describe_anomalies(anomalies)]
    problems += [
        f"drift: {line}{let_through(feature, line)}"
        for feature, line in (describe_anomalies(drift) if drift is not None else [])
        if not (allowed_change and feature == features.LABEL_NAME)
    ]
    return problems + ([classes] if classes else [])


class Executor(base_executor.BaseExecutor):
    def Do(self, input_dict, output_dict, exec_properties):
        [report] = input_dict[INGEST_REPORT_KEY]
        record = IngestReportRecord.read(report.mlmd_artifact)
        label_map = record.label_map
        reference = json.loads(exec_properties[REFERENCE_LABEL_MAP_KEY])
        problems = gate_problems(
            artifact_utils.get_single_instance(input_dict[ANOMALIES_KEY]),
            (input_dict.get(DRIFT_KEY) or [None])[0],
            label_map,
            reference,
            bool(exec_properties[ALLOW_CLASS_CHANGES_KEY]),
            exec_properties[PIPELINE_KEY],
        )
        duplicates = near_duplicate_problem(
            record.near_duplicate_fraction, float(exec_properties[MAX_NEAR_DUPLICATE_FRACTION_KEY])
        )
        problems += [duplicates] if duplicates else []
        split = exec_properties[DRIFT_SPLIT_KEY]
        distances, scope = drift_distances(
            (report, (input_dict.get(BASELINE_INGEST_REPORT_KEY) or [None])[0]),
            (
                artifact_utils.get_single_instance(input_dict[STATISTICS_KEY]),
                (input_dict.get(BASELINE_KEY) or [None])[0],
            ),
            split,
            {
                **dict.fromkeys(SIZE_FEATURES, float(exec_properties[IMAGE_SIZE_SHARE_KEY])),
                BRIGHTNESS: float(exec_properties[BRIGHTNESS_SHARE_KEY]),
            },
        )
        problems += [p for d in distances if (p := share_problem(d, f"{split}_{split}", scope))]
        if problems:
            span = report.get_int_custom_property("span")
            message = f"data gate stopped span {span} before training:\n  " + "\n  ".join(problems)
            if self._context is None or self._context.executor_output_uri is None:
                raise SpanStopped(message)  # no launcher would read the result below
            return execution_result_pb2.ExecutorOutput(
                execution_result=execution_result_pb2.ExecutionResult(
                    code=STOPPED_CODE, result_message=message
                )
            )
        change = class_change(reference, label_map) if reference else None
        verdict = artifact_utils.get_single_instance(output_dict[VERDICT_KEY])
        verdict.set_string_custom_property(
            metadata_keys.CLASS_CHANGE_PROPERTY, change.describe() if change else ""
        )
        verdict.set_string_custom_property(
            metadata_keys.DRIFT_DISTANCES_PROPERTY,
            json.dumps([d.record() for d in distances]),
        )
        verdict.set_string_custom_property(
            metadata_keys.DRIFT_CLASSES_PROPERTY,
            json.dumps(dataclasses.asdict(scope)) if scope else "",
        )
        return None


class DataGateSpec(component_spec.ComponentSpec):
    PARAMETERS = {
        REFERENCE_LABEL_MAP_KEY: component_spec.ExecutionParameter(type=str),
        ALLOW_CLASS_CHANGES_KEY: component_spec.ExecutionParameter(type=int),
        PIPELINE_KEY: component_spec.ExecutionParameter(type=str),
        MAX_NEAR_DUPLICATE_FRACTION_KEY: component_spec.ExecutionParameter(type=float),
        DRIFT_SPLIT_KEY: component_spec.ExecutionParameter(type=str),
        IMAGE_SIZE_SHARE_KEY: component_spec.ExecutionParameter(type=float),
        BRIGHTNESS_SHARE_KEY: component_spec.ExecutionParameter(type=float),
    }
    INPUTS = {
        ANOMALIES_KEY: component_spec.ChannelParameter(type=standard_artifacts.ExampleAnomalies),
        DRIFT_KEY: component_spec.ChannelParameter(
            type=standard_artifacts.ExampleAnomalies, optional=True
        ),
        INGEST_REPORT_KEY: component_spec.ChannelParameter(type=IngestReport),
        STATISTICS_KEY: component_spec.ChannelParameter(type=standard_artifacts.ExampleStatistics),
        BASELINE_KEY: component_spec.ChannelParameter(
            type=standard_artifacts.ExampleStatistics, optional=True
        ),
        BASELINE_INGEST_REPORT_KEY: component_spec.ChannelParameter(
            type=IngestReport, optional=True
        ),
    }
    OUTPUTS = {VERDICT_KEY: component_spec.ChannelParameter(type=DataVerdict)}


class DataGate(base_component.BaseComponent):
    """Args: anomalies (ExampleValidator), drift_anomalies (DistributionValidator; None: no
    drift check), ingest_report (ImageExampleGen), reference_label_map (JSON: the pipeline's
    label map, see DataSnapshot; "{}" on its first span), allow_class_changes (the policy),
    pipeline (its name, for the setting that trains without a vanished class),
    statistics (the span's) and baseline_statistics (the blessed model's data; None or an empty
    channel: no size or brightness drift check), baseline_ingest_report (the same data's
    IngestReport, whose counts per class let the sizes and brightness be compared on the classes
    both have; None or an empty channel: the whole split's sizes only), drift_split (the split
    compared), image_size_share (the largest allowed share distance of height and width),
    brightness_share (that of the mean brightness) and max_near_duplicate_fraction (1.0: no
    limit)."""

    SPEC_CLASS = DataGateSpec
    EXECUTOR_SPEC = executor_spec.ExecutorClassSpec(Executor)

    def __init__(
        self,
        anomalies,
        drift_anomalies,
        ingest_report,
        reference_label_map: str,
        allow_class_changes: bool,
        pipeline: str,
        statistics,
        baseline_statistics,
        drift_split: str,
        image_size_share: float,
        brightness_share: float,
        baseline_ingest_report=None,
        max_near_duplicate_fraction: float = 1.0,
    ):
        super().__init__(
            spec=DataGateSpec(
                anomalies=anomalies,
                drift_anomalies=drift_anomalies,
                ingest_report=ingest_report,
                reference_label_map=reference_label_map,
                allow_class_changes=int(allow_class_changes),
                pipeline=pipeline,
                max_near_duplicate_fraction=float(max_near_duplicate_fraction),
                statistics=statistics,
                baseline_statistics=baseline_statistics,
                drift_split=drift_split,
                image_size_share=float(image_size_share),
                brightness_share=float(brightness_share),
                baseline_ingest_report=baseline_ingest_report,
                verdict=types.Channel(type=DataVerdict),
            )
        )
