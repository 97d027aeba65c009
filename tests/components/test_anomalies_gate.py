import pytest
from tensorflow_metadata.proto.v0 import anomalies_pb2
from tfx.types import artifact_utils, standard_artifacts

from components.anomalies_gate import ANOMALIES_FILE, AnomaliesFound, AnomaliesGate


def _anomalies_artifact(root, per_split: dict[str, anomalies_pb2.Anomalies]):
    artifact = standard_artifacts.ExampleAnomalies()
    artifact.uri = str(root)
    artifact.split_names = artifact_utils.encode_split_names(sorted(per_split))
    for split, anomalies in per_split.items():
        (root / f"Split-{split}").mkdir(parents=True)
        (root / f"Split-{split}" / ANOMALIES_FILE).write_bytes(anomalies.SerializeToString())
    return artifact


def test_clean_data_passes(tmp_path):
    artifact = _anomalies_artifact(tmp_path, {"train": anomalies_pb2.Anomalies()})
    AnomaliesGate.test_call(anomalies=artifact)


def test_anomalies_stop_the_run_naming_split_and_feature(tmp_path):
    bad = anomalies_pb2.Anomalies()
    info = bad.anomaly_info["label"]
    info.short_description = "Out-of-range values"
    info.description = "Unexpectedly large value: 9."
    artifact = _anomalies_artifact(tmp_path, {"train": anomalies_pb2.Anomalies(), "eval": bad})
    with pytest.raises(AnomaliesFound, match=r"eval: feature 'label': Out-of-range values"):
        AnomaliesGate.test_call(anomalies=artifact)
