"""AnomaliesGate: stops the run when ExampleValidator found anomalies.

ExampleValidator only records anomalies; on its own it never fails a run, so a dataset with a
missing feature or an unexpected value would still train. This gate makes it a real gate: it
fails with a message naming every anomaly, and training depends on it.
"""

from apache_beam.io.filesystems import FileSystems
from tensorflow_metadata.proto.v0 import anomalies_pb2
from tfx import v1 as tfx
from tfx.types import artifact_utils, standard_artifacts

ANOMALIES_FILE = "SchemaDiff.pb"  # what TFX 1.16's ExampleValidator writes per split


class AnomaliesFound(RuntimeError):
    """The data does not match the schema; the message names each anomaly."""


def describe_anomalies(anomalies: standard_artifacts.ExampleAnomalies) -> list[str]:
    """One line per anomaly: split, feature, and the validator's own description."""
    found = []
    for split in artifact_utils.decode_split_names(anomalies.split_names):
        path = FileSystems.join(anomalies.uri, f"Split-{split}", ANOMALIES_FILE)
        with FileSystems.open(path) as handle:
            parsed = anomalies_pb2.Anomalies.FromString(handle.read())
        for feature, info in sorted(parsed.anomaly_info.items()):
            found.append(
                f"{split}: feature '{feature}': {info.short_description}: {info.description}"
            )
        if parsed.HasField("dataset_anomaly_info"):
            info = parsed.dataset_anomaly_info
            found.append(f"{split}: dataset: {info.short_description}: {info.description}")
    return found


@tfx.dsl.components.component
def AnomaliesGate(  # noqa: N802  TFX component names are classes
    anomalies: tfx.dsl.components.InputArtifact[standard_artifacts.ExampleAnomalies],
) -> None:
    """Raises AnomaliesFound, naming each anomaly, when ExampleValidator found any."""
    found = describe_anomalies(anomalies)
    if found:
        raise AnomaliesFound(
            f"{len(found)} data anomalies; training stopped:\n  " + "\n  ".join(found)
        )
