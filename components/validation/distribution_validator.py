"""DistributionValidator: TFX's drift check (its executor: TFDV's comparators, thresholds and
messages) publishing its anomalies under the output key `drift_anomalies`.

TFX's own component names its output `anomalies`, as ExampleValidator does. TFX's legacy
launcher (the one Airflow's runner uses) names every output artifact `<output key>:<run id>`,
and ML Metadata keeps artifact names unique per type, so two ExampleAnomalies named
`anomalies:<run id>` in one run make the second publish fail. A key of its own gives the drift
check the same result on every orchestrator.
"""

from __future__ import annotations

from tfx import types
from tfx.components.distribution_validator import executor as tfx_executor
from tfx.dsl.components.base import base_component, executor_spec
from tfx.proto import distribution_validator_pb2
from tfx.proto.orchestration import execution_result_pb2
from tfx.types import component_spec, standard_artifacts, standard_component_specs
from tfx.utils import json_utils

DRIFT_KEY = "drift_anomalies"
STATISTICS_KEY = standard_component_specs.STATISTICS_KEY
BASELINE_KEY = standard_component_specs.BASELINE_STATISTICS_KEY
CONFIG_KEY = standard_component_specs.DISTRIBUTION_VALIDATOR_CONFIG_KEY
SPLIT_PAIRS_KEY = standard_component_specs.INCLUDE_SPLIT_PAIRS_KEY
_TFX_KEY = standard_component_specs.ANOMALIES_KEY


class Executor(tfx_executor.Executor):
    """TFX's executor, handed this component's output under the key it writes."""

    def Do(self, input_dict, output_dict, exec_properties):
        written = super().Do(input_dict, {_TFX_KEY: output_dict[DRIFT_KEY]}, exec_properties)
        output = execution_result_pb2.ExecutorOutput()
        output.output_artifacts[DRIFT_KEY].CopyFrom(written.output_artifacts[_TFX_KEY])
        return output


class DistributionValidatorSpec(component_spec.ComponentSpec):
    PARAMETERS = {
        SPLIT_PAIRS_KEY: component_spec.ExecutionParameter(type=str, optional=True),
        CONFIG_KEY: component_spec.ExecutionParameter(
            type=distribution_validator_pb2.DistributionValidatorConfig, use_proto=True
        ),
    }
    INPUTS = {
        STATISTICS_KEY: component_spec.ChannelParameter(type=standard_artifacts.ExampleStatistics),
        BASELINE_KEY: component_spec.ChannelParameter(type=standard_artifacts.ExampleStatistics),
    }
    OUTPUTS = {DRIFT_KEY: component_spec.ChannelParameter(type=standard_artifacts.ExampleAnomalies)}


class DistributionValidator(base_component.BaseComponent):
    """Args: statistics (this span's), baseline_statistics (what it is compared with; an empty
    channel passes the check), config (the comparators and thresholds) and split_pairs ((span
    split, baseline split) pairs to compare)."""

    SPEC_CLASS = DistributionValidatorSpec
    EXECUTOR_SPEC = executor_spec.ExecutorClassSpec(Executor)

    def __init__(
        self,
        statistics: types.BaseChannel,
        baseline_statistics: types.BaseChannel,
        config: distribution_validator_pb2.DistributionValidatorConfig,
        split_pairs: list[tuple[str, str]],
    ):
        super().__init__(
            spec=DistributionValidatorSpec(
                **{
                    STATISTICS_KEY: statistics,
                    BASELINE_KEY: baseline_statistics,
                    CONFIG_KEY: config,
                    SPLIT_PAIRS_KEY: json_utils.dumps(split_pairs),
                    DRIFT_KEY: types.Channel(type=standard_artifacts.ExampleAnomalies),
                }
            )
        )
