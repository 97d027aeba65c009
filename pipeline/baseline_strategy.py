"""The Evaluator's baseline: the newest blessed model trained before the candidate.

TFX's LatestBlessedModelStrategy returns the newest blessed model overall. On an unchanged re-run
the Trainer is answered from the cache, so its candidate *is* that model: the Evaluator then sees a
new baseline (the candidate itself), evaluates again and the Pusher pushes the same model again.
Choosing among models older than the candidate gives the cached candidate the very baseline it was
first evaluated against, so the whole re-run is answered from the cache, while a newly trained
candidate still faces the newest blessed model.
"""

from __future__ import annotations

from tfx import types
from tfx.components.evaluator import constants
from tfx.dsl.components.common import resolver

CANDIDATE_KEY = "candidate"
MODEL_KEY = "model"
BLESSING_KEY = "model_blessing"


class BaselineBeforeCandidateStrategy(resolver.ResolverStrategy):
    """Inputs: 'candidate' (this run's Trainer model), 'model' and 'model_blessing' (every Model
    and ModelBlessing of the pipeline). Output 'model': the baseline, or nothing."""

    def resolve_artifacts(
        self, store, input_dict: dict[str, list[types.Artifact]]
    ) -> dict[str, list[types.Artifact]] | None:
        del store  # everything needed arrives in input_dict
        candidates = input_dict[CANDIDATE_KEY]
        if not candidates:
            return {CANDIDATE_KEY: [], MODEL_KEY: [], BLESSING_KEY: []}
        # The local runner passes this run's model; TFX's Airflow (legacy) runner passes every
        # model the pipeline's Trainer made, the newest being this run's. Only that one is
        # returned: ML Metadata refuses one artifact as two outputs of the resolver (it can
        # also be the baseline).
        candidate = max(candidates, key=lambda model: model.id)
        candidate_id = candidate.id
        result = {CANDIDATE_KEY: [candidate], MODEL_KEY: [], BLESSING_KEY: []}
        blessings = {
            blessing.get_int_custom_property(constants.ARTIFACT_PROPERTY_CURRENT_MODEL_ID_KEY): (
                blessing
            )
            for blessing in input_dict[BLESSING_KEY]
            if blessing.get_int_custom_property(constants.ARTIFACT_PROPERTY_BLESSED_KEY) == 1
        }
        older_blessed = [
            model
            for model in input_dict[MODEL_KEY]
            if model.id < candidate_id and model.id in blessings
        ]
        if older_blessed:
            baseline = max(older_blessed, key=lambda model: model.id)
            result[MODEL_KEY] = [baseline]
            result[BLESSING_KEY] = [blessings[baseline.id]]
        return result
