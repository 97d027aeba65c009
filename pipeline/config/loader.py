"""The one way a command or an orchestrator gets its settings: a preset, then a config file, then
overrides (a command's flags, an orchestrator's environment, --set), validated.

A later layer wins, so flags beat the config file, which beats the preset; each field set over
the preset remembers which layer set it (`imgpipe config show --origins`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Sequence

from components.training.trainer_config import backbone_defaults
from data_prep.contract.config_error import ConfigError
from pipeline.config import config_file
from pipeline.config.pipeline_config import PRESETS, PipelineConfig, override

# The fields a build folder sets, each as the preset lays it out under that folder.
BUILD_DIR_FIELDS = ("pipeline_root", "metadata_path", "serving_dir")


@dataclasses.dataclass(frozen=True)
class Override:
    """One setting over the preset and the config file, as `--set` reads it (field=value), and
    where it came from (a flag, an environment variable, --set)."""

    setting: str
    origin: str

    @classmethod
    def of(cls, origin: str, field: str, value) -> Override:
        """A typed value (a flag's, a variable's) as a setting; None is null."""
        return cls(config_file.as_setting(field, value), origin)

    @property
    def field(self) -> str:
        return self.setting.partition("=")[0].strip()


@dataclasses.dataclass(frozen=True)
class LoadedConfig:
    """A validated config, the config file's settings (None without a file) and, by dotted
    field name, where each setting that is not the preset's came from."""

    config: PipelineConfig
    settings: dict | None
    origins: dict[str, str]


def load_config(
    preset: str = "local",
    file: str | None = None,
    overrides: Iterable[Override | str] = (),
    *,
    data: str,
    build_dir: str = "build",
    beam_args: Sequence[str] = (),
) -> LoadedConfig:
    """The preset laid out for `data` under `build_dir`, then the config file's settings, then
    each override in order (a plain string is a --set setting), validated; `beam_args` come
    last, after the preset's and the file's, so a command line's Beam options win. ConfigError
    names the layer's field and value."""
    if preset not in PRESETS:
        raise ConfigError("preset", f"{preset!r} is not one of {sorted(PRESETS)}")
    config = PRESETS[preset](data, build_dir)
    settings, origins = None, {}
    if file:
        settings = config_file.read_settings(file)
        config = config_file.apply_settings(config, settings, file)
        origins = dict.fromkeys(config_file.flatten(settings), f"config file {file}")
    for item in overrides:
        item = item if isinstance(item, Override) else Override(item, f"--set {item}")
        config = override(config, item.setting)
        origins[item.field] = item.origin
    config = _obey_explicit_epochs(config, origins)
    config = _adapt_to_backbone(config, origins)
    config = dataclasses.replace(config, beam_args=(*config.beam_args, *beam_args))
    return LoadedConfig(config.validate(), settings, origins)


def _obey_explicit_epochs(config: PipelineConfig, origins: dict[str, str]) -> PipelineConfig:
    """Epochs a user set are trained as set: only the preset's epochs stretch on small data
    (trainer.stretch_epochs), unless the user set that too."""
    if "trainer.epochs" not in origins or "trainer.stretch_epochs" in origins:
        return config
    origins["trainer.stretch_epochs"] = f"trainer.epochs from {origins['trainer.epochs']}"
    trainer = dataclasses.replace(config.trainer, stretch_epochs=False)
    return dataclasses.replace(config, trainer=trainer)


def _adapt_to_backbone(config: PipelineConfig, origins: dict[str, str]) -> PipelineConfig:
    """Trainer fields that neither the user nor the preset set take the backbone's own defaults
    (a pretrained backbone fine-tunes gently, at the input size its features suit); a field the
    user set is obeyed, and a preset's own choice (runlocal's tiny images) is kept."""
    trainer = config.trainer
    general = {field.name: field.default for field in dataclasses.fields(trainer)}
    adapted = {
        field: value
        for field, value in backbone_defaults(trainer).items()
        if f"trainer.{field}" not in origins and getattr(trainer, field) == general[field]
    }
    reason = f"default for trainer.model={trainer.model} with trainer.weights={trainer.weights}"
    origins.update({f"trainer.{field}": reason for field in adapted})
    return dataclasses.replace(config, trainer=dataclasses.replace(trainer, **adapted))


def build_dir_overrides(preset: str, build_dir: str, origin: str) -> list[Override]:
    """The paths the preset lays out under build_dir, as overrides: a build folder named by a
    flag or a variable beats the config file's paths too."""
    if preset not in PRESETS:
        raise ConfigError("preset", f"{preset!r} is not one of {sorted(PRESETS)}")
    laid_out = PRESETS[preset]("", build_dir)
    return [Override.of(origin, field, getattr(laid_out, field)) for field in BUILD_DIR_FIELDS]
