"""The Trainer's warm start: the newest blessed model made before this run's Examples.

TFX's LatestBlessedModelStrategy would hand an unchanged re-run the model that run itself made
(blessed last time), so the Trainer's inputs would change on every re-run and it could never be
answered from the cache. Artifact ids only grow, so a model with an id below the Examples' was
trained before those Examples existed, i.e. on an earlier span: an unchanged re-run (the same,
cached Examples) gets the very base model it had first, and a new span gets the last blessed model.

Only a model trained on the same label map can be continued (its head's outputs mean those
classes): after a class change the gate allowed, the run trains from scratch.
"""

from __future__ import annotations

from tfx import types
from tfx.dsl.components.common import resolver

from pipeline import lineage
from pipeline.validation.baseline_strategy import BLESSING_KEY, MODEL_KEY, blessings_by_model

EXAMPLES_KEY = "examples"


class BlessedBeforeExamplesStrategy(resolver.ResolverStrategy):
    """Inputs: 'examples' (this run's), 'model' and 'model_blessing' (every Model and ModelBlessing
    of the pipeline). Output 'model': the base model, or nothing (the first run, or a class set
    no blessed model was trained on), with its blessing under 'model_blessing'."""

    def resolve_artifacts(
        self, store, input_dict: dict[str, list[types.Artifact]]
    ) -> dict[str, list[types.Artifact]] | None:
        result = {EXAMPLES_KEY: [], MODEL_KEY: [], BLESSING_KEY: []}  # TFX wants every key
        examples = input_dict[EXAMPLES_KEY]
        if not examples:
            return result
        # The local runner passes this run's Examples; TFX's Airflow (legacy) runner passes every
        # Examples the pipeline's ingest made, the newest being this run's.
        this_run = max(artifact.id for artifact in examples)
        blessings = blessings_by_model(input_dict[BLESSING_KEY])
        earlier = sorted(
            (
                model
                for model in input_dict[MODEL_KEY]
                if model.id in blessings and model.id < this_run
            ),
            key=lambda model: -model.id,
        )
        if earlier:
            classes = lineage.examples_label_map(store, this_run)
            base = next(
                (m for m in earlier if lineage.model_label_map(store, m.id) == classes), None
            )
            if base is not None:
                result[MODEL_KEY] = [base]
                result[BLESSING_KEY] = [blessings[base.id]]
        return result
