"""Tiny labelled images and a pipeline config that runs them in about a minute: what the
end-to-end tests share."""

import dataclasses
import pathlib

from components.trainer.config import runlocal
from pipeline.config import PipelineConfig, local_preset
from tests.data_prep import image_files

LABELS = ("cat", "dog", "owl")
IMAGES_PER_CLASS = 10
IN_PROCESS = ("--direct_running_mode=in_memory", "--direct_num_workers=1")


def write_images(folder: pathlib.Path) -> pathlib.Path:
    """IMAGES_PER_CLASS distinct JPEGs in a class folder per label."""
    for label_index, label in enumerate(LABELS):
        for i in range(IMAGES_PER_CLASS):
            path = folder / label / f"{i}.jpg"
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(image_files.jpeg(seed=100 * label_index + i))
    return folder


def tiny_config(images, build, **trainer_changes) -> PipelineConfig:
    """The local preset with Beam in this process, the seconds-long runlocal trainer (changed as
    asked) and no accuracy floor (runlocal learns nothing)."""
    return dataclasses.replace(
        local_preset(str(images), str(build)),
        beam_args=IN_PROCESS,
        trainer=dataclasses.replace(runlocal(), **trainer_changes),
        min_accuracy=0.0,
    )
