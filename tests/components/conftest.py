"""An exported model and an Examples artifact of tiny data, shared by the post-training
components' tests (serving check, evaluation report, TFLite, model card)."""

import os

import pytest
from tfx.types import standard_artifacts

from components.training import export
from components.training.model import build_model
from components.training.preprocessing import Normalization
from components.training.trainer_config import runlocal
from tests.components.training.conftest import LABEL_NAMES, write_shard

NORMALIZATION = Normalization((120.0, 110.0, 100.0), (60.0, 50.0, 40.0))
EVAL_EXAMPLES = 12


def export_model_artifact(root, label_names=LABEL_NAMES) -> standard_artifacts.Model:
    """A Model artifact holding an untrained export, laid out as the Trainer writes it."""
    config = runlocal()
    model = standard_artifacts.Model()
    model.uri = str(root)
    export.export_model(
        build_model(config, len(label_names)),
        os.path.join(model.uri, "Format-Serving"),
        config.image_size,
        list(label_names),
        NORMALIZATION,
    )
    return model


@pytest.fixture(scope="session")
def model_artifact(tmp_path_factory):
    return export_model_artifact(tmp_path_factory.mktemp("model"))


@pytest.fixture(scope="session")
def examples_artifact(tmp_path_factory):
    """An Examples artifact with an 'eval' split of EVAL_EXAMPLES labelled JPEGs in two shards."""
    examples = standard_artifacts.Examples()
    examples.uri = str(tmp_path_factory.mktemp("examples"))
    examples.split_names = '["eval"]'
    split = os.path.join(examples.uri, "Split-eval")
    os.makedirs(split)
    half = EVAL_EXAMPLES // 2
    for shard in range(2):
        write_shard(os.path.join(split, f"data-{shard}.gz"), shard * half, half)
    return examples
