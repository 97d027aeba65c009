"""Pipeline settings as dataclasses, checked before any work starts, with presets.

A preset is a complete, valid config: `local` trains the embedded dataset in minutes on two CPU
cores (what `make run-local` uses); `runlocal` runs every component in seconds and learns nothing
(what the tests and the notebook use). Real data gets its settings from a config file over
`local` (`imgpipe run --config`; pipeline/example.yaml), not from a third preset.
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
import types
import typing

from components.training.trainer_config import TrainerConfig, TuningConfig, runlocal
from data_prep.contract.config_error import ConfigError
from data_prep.ingest_config import IngestConfig
from pipeline.mlmd_connection import metadata_path_under

_NAME = re.compile(r"^[a-z][a-z0-9_-]{0,62}$")
SCHEDULE_PRESETS = ("@once", "@hourly", "@daily", "@weekly", "@monthly", "@yearly")
_CRON_FIELD = re.compile(r"^[0-9*/,\-A-Za-z?]+$")


@dataclasses.dataclass(frozen=True)
class GateConfig:
    """The data gate between ingest and Transform: what stops a span before training.

    Each span is compared with the data the current blessed model was trained on (its train
    split's statistics, by TFX's DistributionValidator); a distance above a threshold stops the
    run, naming the feature, the metric, the measured value and the threshold. The defaults let
    through the sampling noise of a few hundred images per class and a handful of odd images,
    and stop a changed source: a class share moved by a fifth, a fifth of the images in another
    format, at another size or exposure.

    Attributes:
      allow_class_changes: a span whose class set differs from the reference label map (the
        blessed model's classes) stops at the gate, naming the classes; true lets a span with new
        classes train a model with the new head, evaluated against the accuracy floor only (a
        baseline with another label map is never compared against). A class that is gone still
        stops: its id stays reserved, and the model would have an output no data trains.
      class_distribution_linf: the largest allowed L-infinity distance between the class shares
        (`label_name`) of the span and of the baseline data.
      image_format_linf: the same for the JPEG/PNG mix (`image_format`).
      image_size_share: the largest allowed share of images that moved across any `height`
        threshold, and any `width` threshold (the L-infinity distance between the span's and
        the baseline's distributions, over the classes both have; docs/data-gate.md).
      brightness_share: the same for the images' mean brightness (exposure): the largest
        allowed share of images that moved across any mean grey level.
      max_near_duplicate_fraction: the largest allowed share of the span's distinct images that
        are in near-duplicate clusters (ingest.near_duplicate_max_difference); 1.0 allows any.
    """

    allow_class_changes: bool = False
    class_distribution_linf: float = 0.2
    image_format_linf: float = 0.2
    image_size_share: float = 0.2
    brightness_share: float = 0.2
    max_near_duplicate_fraction: float = 1.0

    def validate(self) -> GateConfig:
        shares = ("class_distribution_linf", "image_format_linf", "image_size_share")
        for field in (*shares, "brightness_share"):
            value = getattr(self, field)
            if not 0.0 < value <= 1.0:
                raise ConfigError(field, f"{value} is not in (0, 1]")
        if not 0.0 <= self.max_near_duplicate_fraction <= 1.0:
            raise ConfigError(
                "max_near_duplicate_fraction",
                f"{self.max_near_duplicate_fraction} is not in [0, 1]",
            )
        return self


@dataclasses.dataclass(frozen=True)
class PipelineConfig:
    """One pipeline and where it keeps its state.

    Attributes:
      ingest: how raw images become the Examples artifact (its `input` is the data).
      trainer: how the model is trained (its image_size also sizes Transform's statistics).
      gate: the data gate's drift thresholds and class-change policy.
      tuning: an optional hyperparameter search whose best values the Trainer uses (off by
        default).
      min_accuracy: the Evaluator blesses (and the Pusher pushes) only a model whose eval
        accuracy reaches this and does not fall below the last blessed model's.
      int8_max_accuracy_gap_points: the int8 TFLite model is refused (not written, not placed
        beside the pushed model; the summary says why) when its eval accuracy falls more than
        this many percentage points below the SavedModel's. The float models are kept.
      name: pipeline name; ML Metadata groups runs under it.
      pipeline_root: where TFX writes every artifact.
      metadata_path: the SQLite ML Metadata store of local runs.
      serving_dir: pushed models land in <serving_dir>/<name>/<version>/.
      beam_args: Beam options for every Beam-based component. On the local DirectRunner (the
        default) its running mode is chosen by the input's size unless given here: in this
        process for small inputs, one worker process per core above
        (pipeline/config/beam_options.py).
      enable_cache: reuse an earlier execution when a component's inputs and settings are equal.
      schedule: when an orchestrator (Airflow) starts a run: a preset such as "@daily", a
        five-field cron expression ("0 3 * * *"), or None for runs started by hand. Each run
        takes a new data snapshot, so images added since the last run become the next span.
    """

    ingest: IngestConfig
    trainer: TrainerConfig = TrainerConfig()
    gate: GateConfig = GateConfig()
    tuning: TuningConfig = TuningConfig()
    min_accuracy: float = 0.9
    int8_max_accuracy_gap_points: float = 1.0
    name: str = "imgpipe"
    pipeline_root: str = "build/tfx"
    metadata_path: str = metadata_path_under("build")
    serving_dir: str = "build/serving"
    beam_args: tuple[str, ...] = ()
    enable_cache: bool = True
    schedule: str | None = "@daily"

    def validate(self) -> PipelineConfig:
        if not _NAME.match(self.name):
            raise ConfigError("name", f"{self.name!r} must match {_NAME.pattern}")
        if not 0.0 <= self.min_accuracy <= 1.0:
            raise ConfigError("min_accuracy", f"{self.min_accuracy} is not between 0 and 1")
        if not 0.0 <= self.int8_max_accuracy_gap_points <= 100.0:
            raise ConfigError(
                "int8_max_accuracy_gap_points",
                f"{self.int8_max_accuracy_gap_points} is not between 0 and 100",
            )
        for field in ("pipeline_root", "metadata_path", "serving_dir"):
            if not getattr(self, field):
                raise ConfigError(field, "is empty")
        _check_serving_folder_apart(self)
        if self.schedule is not None and not _valid_schedule(self.schedule):
            raise ConfigError(
                "schedule",
                f"{self.schedule!r} is neither one of {', '.join(SCHEDULE_PRESETS)} nor a "
                "five-field cron expression such as '0 3 * * *'",
            )
        for part in ("ingest", "trainer", "gate", "tuning"):
            try:
                getattr(self, part).validate()
            except ConfigError as error:
                problem = str(error).split(": ", 1)[1]
                raise ConfigError(f"{part}.{error.field}", problem) from error
        if self.ingest.eval_fraction <= 0.0:
            raise ConfigError(
                "ingest.eval_fraction",
                f"{self.ingest.eval_fraction} leaves no eval split, which the Evaluator scores "
                "the model on: give a value between 0 and 1",
            )
        return self


def _check_serving_folder_apart(config: PipelineConfig) -> None:
    """The serving folder is shared with model servers and other tools, and a push renames and
    moves folders in it: it must not hold, or lie inside, the input data or the build folders."""
    serving = os.path.join(config.serving_dir, config.name)
    others = {
        "ingest.input": config.ingest.input,
        "pipeline_root": config.pipeline_root,
        "metadata_path": config.metadata_path,
    }
    for field, path in others.items():
        if _overlap(serving, path):
            raise ConfigError(
                "serving_dir",
                f"the serving folder {_resolved(serving)} overlaps {field} {_resolved(path)}: "
                "give them separate folders",
            )


def _resolved(path: str) -> str:
    return path if "://" in path else os.path.realpath(path)


def _overlap(first: str, second: str) -> bool:
    """One path is the other or lies inside it (links resolved)."""
    a, b = _resolved(first).rstrip("/") + "/", _resolved(second).rstrip("/") + "/"
    return a.startswith(b) or b.startswith(a)


def with_absolute_paths(config: PipelineConfig) -> PipelineConfig:
    """config with its local paths (data, pipeline root, store, serving folder) made absolute
    against this process's folder, as a run records them in ML Metadata: a store then answers
    the same from any folder. URIs (gs://...) stay as they are."""

    def absolute(path: str) -> str:
        return path if "://" in path else os.path.abspath(path)

    return dataclasses.replace(
        config,
        ingest=dataclasses.replace(config.ingest, input=absolute(config.ingest.input)),
        pipeline_root=absolute(config.pipeline_root),
        metadata_path=absolute(config.metadata_path),
        serving_dir=absolute(config.serving_dir),
    )


def check_data_fits(config: PipelineConfig, files: int) -> None:
    """Raises ConfigError (before any work) when the input's share of training examples cannot
    fill one training step on one replica, naming a batch that fits; the Trainer would fail
    otherwise, minutes later. `files` is the input's file count, so the estimate is an upper
    bound: rejected and ignored files make fewer examples still."""
    share = 1.0 - config.ingest.eval_fraction - config.ingest.test_fraction
    train = int(files * share)
    trainer = config.trainer
    step = trainer.batch_size * trainer.gradient_accumulation_steps
    if train >= step:
        return
    fitting = 1 << max(0, (train // trainer.gradient_accumulation_steps).bit_length() - 1)
    batch = "one batch" if trainer.gradient_accumulation_steps == 1 else "one accumulated step"
    raise ConfigError(
        "trainer.batch_size",
        f"{files} labelled images in {config.ingest.input} give about {train} training examples "
        f"({share:.0%}), fewer than {batch} of {step}; use a smaller batch "
        f"(--set trainer.batch_size={fitting}) or add images",
    )


def _valid_schedule(schedule: str) -> bool:
    if schedule.startswith("@"):
        return schedule in SCHEDULE_PRESETS
    fields = schedule.split()
    return len(fields) == 5 and all(_CRON_FIELD.match(field) for field in fields)


def local_preset(data: str, build_dir: str = "build") -> PipelineConfig:
    """The embedded dataset (or your folder) in minutes on a 2-core laptop."""
    return PipelineConfig(
        ingest=IngestConfig(input=data),
        pipeline_root=os.path.join(build_dir, "tfx"),
        metadata_path=metadata_path_under(build_dir),
        serving_dir=os.path.join(build_dir, "serving"),
    )


def runlocal_preset(data: str, build_dir: str = "build") -> PipelineConfig:
    """Every component in seconds on tiny data: the runlocal trainer, which learns nothing, so
    no accuracy floor. Proves the whole path works; what the tests and the notebook run."""
    return dataclasses.replace(local_preset(data, build_dir), trainer=runlocal(), min_accuracy=0.0)


PRESETS = {"local": local_preset, "runlocal": runlocal_preset}


def override(config, setting: str):
    """config with one 'path.to.field=value' setting applied, e.g. 'trainer.epochs=5' or
    'trainer.precision=mixed_bfloat16'. Values parse as JSON (numbers, true/false, null, lists),
    else as text; the field's type is checked here and its range by validate()."""
    path, separator, raw = setting.partition("=")
    if not separator or not path:
        raise ConfigError(setting, "is not of the form field=value (e.g. trainer.epochs=5)")
    head, _, rest = path.strip().partition(".")
    fields = {field.name: field for field in dataclasses.fields(config)}
    if head not in fields:
        raise ConfigError(path, f"unknown setting; {type(config).__name__} has {sorted(fields)}")
    if rest:
        inner = getattr(config, head)
        if not dataclasses.is_dataclass(inner):
            raise ConfigError(path, f"{head!r} has no fields")
        try:
            value = override(inner, f"{rest}={raw}")
        except ConfigError as error:
            raise ConfigError(f"{head}.{error.field}", str(error).split(": ", 1)[1]) from error
    else:
        value = _typed(head, raw.strip(), typing.get_type_hints(type(config))[head])
    return dataclasses.replace(config, **{head: value})


def _typed(name: str, raw: str, annotation):
    try:
        value = json.loads(raw)
    except json.JSONDecodeError:
        value = raw
    allowed = typing.get_args(annotation) if isinstance(annotation, types.UnionType) else ()
    allowed = allowed or (annotation,)
    if value is None and type(None) in allowed:  # before str, which would take "null" as text
        return None
    for kind in allowed:
        origin = typing.get_origin(kind) or kind
        if origin is tuple and isinstance(value, list):
            return tuple(value)
        if origin is float and isinstance(value, int) and not isinstance(value, bool):
            return float(value)
        if origin is str and not isinstance(value, str):
            return raw  # e.g. a name that happens to parse as a number
        if isinstance(origin, type) and isinstance(value, origin):
            if origin is int and isinstance(value, bool):
                continue
            return value
    names = " or ".join(getattr(kind, "__name__", str(kind)) for kind in allowed)
    raise ConfigError(name, f"{raw!r} is not of type {names}")
