"""Tiny labelled images and a pipeline config that runs them in about a minute: what the
end-to-end tests share."""

import dataclasses
import pathlib

from pipeline.config import PipelineConfig, runlocal_preset
from tests.data_prep import image_files

LABELS = ("cat", "dog", "owl")
IMAGES_PER_CLASS = 10


def write_images(folder: pathlib.Path) -> pathlib.Path:
    """IMAGES_PER_CLASS distinct JPEGs in a class folder per label."""
    for label_index, label in enumerate(LABELS):
        for i in range(IMAGES_PER_CLASS):
            path = folder / label / f"{i}.jpg"
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(image_files.jpeg(seed=100 * label_index + i))
    return folder


def tiny_config(images, build, **trainer_changes) -> PipelineConfig:
    """The runlocal preset (Beam in this process for so few images, the seconds-long trainer,
    no accuracy floor), its trainer changed as asked."""
    config = runlocal_preset(str(images), str(build))
    return dataclasses.replace(
        config, trainer=dataclasses.replace(config.trainer, **trainer_changes)
    )
