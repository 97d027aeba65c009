"""The drift check's executor on statistics made by TFDV: TFX's comparison (metric, measured
distance, threshold) written under the component's own output key, and a pass without a
baseline."""

import pandas as pd
import tensorflow_data_validation as tfdv
from tfx.dsl.components.base import base_executor
from tfx.types import artifact_utils, standard_artifacts

from components.validation import data_gate, distribution_validator
from data_prep.contract import features
from pipeline.config.pipeline_config import GateConfig
from pipeline.factory import DRIFT_SPLIT, drift_config


def _statistics(root, labels):
    """An ExampleStatistics artifact with a train split of the given label names."""
    artifact = standard_artifacts.ExampleStatistics()
    artifact.uri = str(root)
    artifact.split_names = artifact_utils.encode_split_names([DRIFT_SPLIT])
    statistics = tfdv.generate_statistics_from_dataframe(
        pd.DataFrame(
            {
                features.LABEL_NAME: list(labels),
                features.IMAGE_FORMAT: ["jpeg"] * len(labels),
                features.HEIGHT: [24] * len(labels),
                features.WIDTH: [32] * len(labels),
            }
        )
    )
    (root / f"Split-{DRIFT_SPLIT}").mkdir(parents=True)
    (root / f"Split-{DRIFT_SPLIT}" / "FeatureStats.pb").write_bytes(statistics.SerializeToString())
    return artifact


def _check(tmp_path, labels, baseline_labels):
    anomalies = standard_artifacts.ExampleAnomalies()
    anomalies.uri = str(tmp_path / "drift")
    executor = distribution_validator.Executor(
        base_executor.BaseExecutor.Context(executor_output_uri=str(tmp_path / "output.pb"))
    )
    output = executor.Do(
        {
            distribution_validator.STATISTICS_KEY: [_statistics(tmp_path / "span", labels)],
            distribution_validator.BASELINE_KEY: (
                [_statistics(tmp_path / "baseline", baseline_labels)] if baseline_labels else []
            ),
        },
        {distribution_validator.DRIFT_KEY: [anomalies]},
        {
            distribution_validator.CONFIG_KEY: drift_config(GateConfig()),
            distribution_validator.SPLIT_PAIRS_KEY: f'[["{DRIFT_SPLIT}", "{DRIFT_SPLIT}"]]',
        },
    )
    return output, anomalies


def test_a_moved_class_share_is_reported_under_the_drift_key_with_tfdvs_measure(tmp_path):
    output, anomalies = _check(tmp_path, ["cat"] * 9 + ["dog"], ["cat"] * 5 + ["dog"] * 5)
    assert list(output.output_artifacts) == [distribution_validator.DRIFT_KEY]
    found = data_gate.describe_anomalies(anomalies)
    assert [feature for feature, _ in found] == [features.LABEL_NAME]
    [(_, line)] = found
    assert line.startswith("train_train: feature 'label_name': High Linfty distance")
    assert "is 0.4" in line and "above the threshold 0.2" in line


def test_the_same_shares_pass_and_no_baseline_passes(tmp_path):
    _, same = _check(tmp_path / "same", ["cat", "dog"] * 5, ["dog", "cat"] * 4)
    assert data_gate.describe_anomalies(same) == []
    _, first = _check(tmp_path / "first", ["cat", "dog"], None)
    assert data_gate.describe_anomalies(first) == []
