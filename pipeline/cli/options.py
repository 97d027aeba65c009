"""The options several commands share: how a command picks its settings (preset, config file,
--set) and which ML Metadata store it reads or writes."""

from __future__ import annotations

import argparse
import contextlib
import os
from collections.abc import Iterable

from pipeline.config.loader import LoadedConfig, Override, build_dir_overrides, load_config
from pipeline.config.pipeline_config import PRESETS

DEFAULT_BUILD_DIR = "build"


def config_options() -> argparse.ArgumentParser:
    """How a command picks its settings: preset, config file, --set overrides, data, build dir.
    Flags beat the config file, which beats the preset."""
    parent = argparse.ArgumentParser(add_help=False)
    parent.add_argument("--data", help="folder of class folders or a manifest (default: embedded)")
    parent.add_argument("--preset", choices=list(PRESETS), default="local")
    parent.add_argument(
        "--build-dir",
        help=f"pipeline root, MLMD, models, logs (default: {DEFAULT_BUILD_DIR}, or the config "
        "file's paths)",
    )
    parent.add_argument(
        "--config",
        metavar="FILE",
        help="a YAML (or .toml) file of settings over the preset, e.g. pipeline/example.yaml; "
        "`imgpipe config show` prints every field",
    )
    parent.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="FIELD=VALUE",
        help="override one setting (over --config), e.g. trainer.epochs=5, "
        "trainer.precision=mixed_bfloat16, trainer.jit_compile=true, min_accuracy=0.8 "
        "(repeatable; every field is documented in docs/configuration.md)",
    )
    return parent


def build_dir(args) -> str:
    """The build folder a command's logs go to: --build-dir, else the default."""
    return args.build_dir or DEFAULT_BUILD_DIR


def effective_config(
    args, beam_args: list[str], generate_data: bool, flags: Iterable[Override] = ()
) -> LoadedConfig:
    """The command's settings through load_config: the preset, the config file, --data,
    --build-dir and `flags` (a command's own flags), then --set. When nothing names the data, it
    is the embedded dataset under the build folder, generated (once valid) when generate_data."""
    overrides = []
    if args.data:
        overrides.append(Override.of("--data", "ingest.input", args.data))
    if args.build_dir:
        overrides += build_dir_overrides(args.preset, args.build_dir, "--build-dir")
    loaded = load_config(
        args.preset,
        args.config,
        [*overrides, *flags, *args.set],
        data=_embedded_data(build_dir(args)),
        build_dir=build_dir(args),
        beam_args=beam_args,
    )
    if generate_data:
        with embedded_data_drawn(args, loaded):
            pass
    return loaded


def embedded_data_drawn(args, loaded: LoadedConfig) -> contextlib.AbstractContextManager:
    """Draws the embedded dataset while the caller's block runs (forked workers: the block, such
    as `imgpipe run`'s imports, keeps a core) when the config's input is it and nothing named
    other data; a block that does nothing else draws it at once. A no-op otherwise."""
    from data_prep.default_dataset import drawing_default_dataset

    embedded = _embedded_data(build_dir(args))
    if _named_data(args, loaded) or loaded.config.ingest.input != embedded:
        return contextlib.nullcontext()
    return drawing_default_dataset(embedded)


def named_input_problem(args, loaded: LoadedConfig) -> str | None:
    """A named local input that is missing or an empty folder, found before the command loads
    TensorFlow, Beam and TFX (seconds), so a mistyped --data is said at once."""
    from data_prep.reading.files import local_input_problem

    data = loaded.config.ingest.input
    if data == _embedded_data(build_dir(args)) and not _named_data(args, loaded):
        return None  # drawn during the run
    return local_input_problem(data)


def _named_data(args, loaded: LoadedConfig) -> str | None:
    return args.data or (loaded.settings or {}).get("ingest", {}).get("input")


def _embedded_data(build_dir: str) -> str:
    return os.path.join(build_dir, "default_data")


def store_flags(parser: argparse.ArgumentParser):
    """The flags that name an ML Metadata store, as one argument group of `parser`."""
    store = parser.add_argument_group(
        "metadata store",
        "default: the local SQLite store under --build-dir. Each flag may instead come from "
        "IMGPIPE_MLMD_SQLITE, IMGPIPE_MLMD_MYSQL, IMGPIPE_MLMD_GRPC, IMGPIPE_MLMD_USER; a MySQL "
        "password only from IMGPIPE_MLMD_PASSWORD.",
    )
    store.add_argument("--mlmd-sqlite", metavar="PATH", help="a SQLite ML Metadata file")
    store.add_argument("--mlmd-mysql", metavar="HOST[:PORT]/DB", help="a MySQL ML Metadata store")
    store.add_argument("--mlmd-user", metavar="USER", help="MySQL user")
    store.add_argument("--mlmd-grpc", metavar="HOST:PORT", help="an ML Metadata gRPC service")
    return store


def store_options(defaults: bool = True, answers: bool = True) -> argparse.ArgumentParser:
    """Options every ML Metadata query shares: which store, which pipeline, JSON or tables.

    defaults=False for a nested subcommand, so `runs --json diff A B` keeps what `runs` parsed;
    answers=False for commands that print no answer (ui, report): the store options only.
    """
    parent = argparse.ArgumentParser(
        add_help=False, argument_default=None if defaults else argparse.SUPPRESS
    )
    store = store_flags(parent)
    store.add_argument(
        "--build-dir",
        default="build" if defaults else argparse.SUPPRESS,
        help="as for `imgpipe run`",
    )
    if not answers:
        return parent
    parent.add_argument("--pipeline", help="only runs of this pipeline (default: all)")
    parent.add_argument(
        "--json",
        action="store_true",
        default=False if defaults else argparse.SUPPRESS,
        help="print JSON instead of tables",
    )
    return parent


def store_target(args, default_sqlite: str | None = None):
    """The ML Metadata store the store flags name (default: `default_sqlite`, else the SQLite
    file of --build-dir)."""
    from pipeline.mlmd_connection import MlmdTarget, metadata_path_under

    return MlmdTarget.resolve(
        {
            "sqlite": args.mlmd_sqlite,
            "mysql": args.mlmd_mysql,
            "grpc": args.mlmd_grpc,
            "user": args.mlmd_user,
        },
        default_sqlite=default_sqlite or metadata_path_under(args.build_dir),
    )
