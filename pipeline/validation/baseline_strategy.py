"""The baselines a run is measured against: the Evaluator's baseline model, and the data the
drift check compares a new span with. Both come from the newest blessed model trained before.

TFX's LatestBlessedModelStrategy returns the newest blessed model overall. On an unchanged re-run
the Trainer is answered from the cache, so its candidate *is* that model: the Evaluator then sees a
new baseline (the candidate itself), evaluates again and the Pusher pushes the same model again.
Choosing among models older than the candidate gives the cached candidate the very baseline it was
first evaluated against, so the whole re-run is answered from the cache, while a newly trained
candidate still faces the newest blessed model. The same holds for the drift baseline: a re-run
of a span is compared with the data it was first compared with, never with itself.

A baseline whose label map differs from the candidate's is never returned: its class ids mean
other classes (or its outputs are fewer), so TFMA's comparison would be meaningless or fail. The
data gate lets such a candidate through only under the class-change policy, and records it.
"""

from __future__ import annotations

from tfx import types
from tfx.components.evaluator import constants
from tfx.dsl.components.common import resolver
from tfx.types import artifact_utils

from pipeline import lineage

CANDIDATE_KEY = "candidate"
MODEL_KEY = "model"
BLESSING_KEY = "model_blessing"
STATISTICS_KEY = "statistics"
INGEST_REPORT_KEY = "ingest_report"


def blessings_by_model(blessings: list[types.Artifact]) -> dict[int, types.Artifact]:
    """Model id -> the ModelBlessing that passed it, for the blessings that did."""
    return {
        blessing.get_int_custom_property(constants.ARTIFACT_PROPERTY_CURRENT_MODEL_ID_KEY): blessing
        for blessing in blessings
        if blessing.get_int_custom_property(constants.ARTIFACT_PROPERTY_BLESSED_KEY) == 1
    }


class BaselineBeforeCandidateStrategy(resolver.ResolverStrategy):
    """Inputs: 'candidate' (this run's Trainer model), 'model' and 'model_blessing' (every Model
    and ModelBlessing of the pipeline). Output 'model': the baseline, or nothing."""

    def resolve_artifacts(
        self, store, input_dict: dict[str, list[types.Artifact]]
    ) -> dict[str, list[types.Artifact]] | None:
        candidates = input_dict[CANDIDATE_KEY]
        if not candidates:
            return {CANDIDATE_KEY: [], MODEL_KEY: [], BLESSING_KEY: []}
        # The local runner passes this run's model; TFX's Airflow (legacy) runner passes every
        # model the pipeline's Trainer made, the newest being this run's. Only that one is
        # returned: ML Metadata refuses one artifact as two outputs of the resolver (it can
        # also be the baseline).
        candidate = max(candidates, key=lambda model: model.id)
        result = {CANDIDATE_KEY: [candidate], MODEL_KEY: [], BLESSING_KEY: []}
        blessings = blessings_by_model(input_dict[BLESSING_KEY])
        older_blessed = [
            model
            for model in input_dict[MODEL_KEY]
            if model.id < candidate.id and model.id in blessings
        ]
        if older_blessed:
            baseline = max(older_blessed, key=lambda model: model.id)
            if lineage.model_label_map(store, baseline.id) == lineage.model_label_map(
                store, candidate.id
            ):
                result[MODEL_KEY] = [baseline]
                result[BLESSING_KEY] = [blessings[baseline.id]]
        return result


class BlessedTrainingStatisticsStrategy(resolver.ResolverStrategy):
    """Inputs: 'statistics' (this run's StatisticsGen output), 'model' and 'model_blessing'
    (every Model and ModelBlessing of the pipeline), and optionally 'ingest_report' (every
    IngestReport). Output 'statistics': the statistics of the data the newest blessed model was
    trained on, among data older than this span, or nothing (the pipeline's first span, or no
    model blessed yet); 'ingest_report': the same data's IngestReport."""

    def resolve_artifacts(
        self, store, input_dict: dict[str, list[types.Artifact]]
    ) -> dict[str, list[types.Artifact]] | None:
        result = {STATISTICS_KEY: [], MODEL_KEY: [], BLESSING_KEY: []}
        if INGEST_REPORT_KEY in input_dict:
            result[INGEST_REPORT_KEY] = []
        if not input_dict[STATISTICS_KEY]:
            return result
        current = max(input_dict[STATISTICS_KEY], key=lambda statistics: statistics.id)
        blessed = blessings_by_model(input_dict[BLESSING_KEY])
        for model in sorted(input_dict[MODEL_KEY], key=lambda model: -model.id):
            if model.id not in blessed:
                continue
            examples_id = lineage.training_examples_id(store, model.id)
            statistics_id = (
                None if examples_id is None else lineage.examples_statistics_id(store, examples_id)
            )
            if statistics_id is not None and statistics_id < current.id:
                result[STATISTICS_KEY] = [_artifact(store, statistics_id)]
                if INGEST_REPORT_KEY in result:
                    report = lineage.ingest_report_artifact(store, examples_id)
                    result[INGEST_REPORT_KEY] = (
                        [] if report is None else [_artifact(store, report.id)]
                    )
                return result
        return result


def _artifact(store, artifact_id: int) -> types.Artifact:
    """A TFX Artifact for an ML Metadata artifact id (the resolver hands out TFX Artifacts)."""
    [found] = store.get_artifacts_by_id([artifact_id])
    [kind] = store.get_artifact_types_by_id([found.type_id])
    return artifact_utils.deserialize_artifact(kind, found)
