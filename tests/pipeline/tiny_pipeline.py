"""Tiny labelled images, a pipeline config that runs them in about a minute, and a store of two
such runs that differ in one setting: what the end-to-end tests share."""

import dataclasses
import os
import pathlib
import subprocess
import sys

import pytest

from pipeline.config.pipeline_config import PipelineConfig, runlocal_preset
from pipeline.exit_codes import NOT_PUSHED, OK
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


FIRST_RATE, SECOND_RATE = 0.003, 0.01  # the one setting the two runs differ in
CHECKOUT = pathlib.Path(__file__).resolve().parents[2]


@dataclasses.dataclass
class TwoRuns:
    config: PipelineConfig  # the first run's
    images: pathlib.Path
    first: object  # lineage.PipelineRun
    second: object

    @property
    def store(self):
        from pipeline.runners.local import open_store

        return open_store(self.config.metadata_path)

    def cli(self, capsys, *command) -> tuple[int, str, str]:
        """An imgpipe command over this store: (exit code, stdout, stderr)."""
        from pipeline.cli import main

        code = main([*command, "--mlmd-sqlite", self.config.metadata_path])
        captured = capsys.readouterr()
        return code, captured.out, captured.err


def run_twice(images: pathlib.Path, build: pathlib.Path) -> TwoRuns:
    """Two runs of `imgpipe run --preset runlocal` into one store, the second with another
    learning rate, each in its own process as a user runs it: in the build folder's parent with
    a relative build folder, as `make run-local` does, so the store's answers from other folders
    are tested; the returned config holds absolute paths."""
    from pipeline.config.pipeline_config import with_absolute_paths
    from pipeline.lineage import list_runs
    from pipeline.runners.local import open_store

    command = [sys.executable, "-m", "pipeline.cli", "run", "--preset", "runlocal"]
    command += ["--data", str(images), "--build-dir", build.name]
    environment = {**os.environ, "PYTHONPATH": str(CHECKOUT)}  # this checkout, not a copy
    for rate in (FIRST_RATE, SECOND_RATE):
        finished = subprocess.run(
            [*command, "--set", f"trainer.learning_rate={rate}"],
            cwd=build.parent,
            env=environment,
            capture_output=True,
            text=True,
        )
        # A run whose model is not blessed (the second may score below the first) is complete.
        assert finished.returncode in (OK, NOT_PUSHED), finished.stdout + finished.stderr
    with pytest.MonkeyPatch.context() as patch:
        patch.chdir(build.parent)
        config = with_absolute_paths(tiny_config(images, build.name, learning_rate=FIRST_RATE))
    second, first = list_runs(open_store(config.metadata_path), config.name)  # newest first
    return TwoRuns(config, images, first, second)
