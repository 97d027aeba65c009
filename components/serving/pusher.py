"""Pushes a blessed model, with its model card, TFLite models and evaluation beside it, so that a
served version folder is always whole and known to serve, and nothing writes into it once it
is in place.

TFX's Pusher copies straight into `<base>/<version>/` (a kill or a full disk leaves half a
model there, which a model server may try to load), skips the copy when the folder exists yet
records the push, and never looks at the folder again. Here the model and the files that go
beside it (the ModelCard artifact's folder: the card, the TFLite models, the evaluation) are
copied into a hidden staging folder inside the serving root, named after the pipeline run
(staging_name) or, where the orchestrator names none, after the push's output folder
(output_staging_name), created exclusively and never through a link; its files are compared
with theirs, the model is loaded and answers its warmup requests in a fresh process, and only
then is the folder renamed into place: one step, on the same filesystem, under the serving
root's lock, after which nothing writes into it. A push that did not happen
raises, so it is never recorded as pushed. The files pushed (sizes and SHA-256)
are recorded on the PushedModel artifact, so a later run can tell that the folder still holds
them (`version_problems`) and push again when it does not.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import re
import subprocess
import sys
import time

from tfx.components.pusher import executor as tfx_pusher
from tfx.dsl.components.base import base_component, executor_spec
from tfx.dsl.io import fileio
from tfx.proto import pusher_pb2
from tfx.types import (
    artifact_utils,
    channel,
    component_spec,
    standard_artifacts,
    standard_component_specs,
)
from tfx.utils import io_utils, json_utils, proto_utils

from components.artifacts import ModelCard
from components.serving import serving_root
from components.serving.versions import SAVED_MODEL_FILE, VARIABLES_INDEX

LOGGER = logging.getLogger(__name__)
TEMPORARY_PREFIX = ".pushing-"
# PushedModel custom properties: TFX's three, and the files a push wrote.
PUSHED, DESTINATION, VERSION = "pushed", "pushed_destination", "pushed_version"
PUSHED_FILES = "pushed_files"
BESIDE_KEY = "model_card"  # the input whose folder holds the files pushed beside the model
PROBE_TIMEOUT_SECONDS = 900


class PushError(RuntimeError):
    """The model was not pushed; the message says why."""


def file_manifest(folder: str) -> dict[str, list]:
    """relative path -> [size, sha256] of every file under folder."""
    manifest = {}
    for directory, _, names in fileio.walk(folder):
        for name in names:
            path = os.path.join(directory, name)
            manifest[os.path.relpath(path, folder)] = _size_and_digest(path)
    return manifest


def _size_and_digest(path: str) -> list:
    digest = hashlib.sha256()
    size = 0
    with fileio.open(path, "rb") as handle:
        while block := handle.read(1 << 20):
            digest.update(block)
            size += len(block)
    return [size, digest.hexdigest()]


def manifest_problems(expected: dict[str, list], found: dict[str, list]) -> list[str]:
    """How found differs from expected, one phrase per file (at most a few)."""
    problems = [f"{name} is missing" for name in sorted(set(expected) - set(found))]
    problems += [
        f"{name} differs (SHA-256 {found[name][1][:12]}, {found[name][0]} bytes; pushed "
        f"{expected[name][1][:12]}, {expected[name][0]} bytes)"
        for name in sorted(set(expected) & set(found))
        if found[name] != expected[name]
    ]
    problems += [f"{name} was not pushed" for name in sorted(set(found) - set(expected))]
    return problems[:5]


def staging_name(run_id: str) -> str:
    """The hidden folder a run stages its push in (model servers load numbered folders only).
    It carries the pipeline run's id, which the run recorded in ML Metadata before it started,
    so a later run of the same store can prove the folder is its own (serving_folder.py)."""
    return f"{TEMPORARY_PREFIX}{re.sub(r'[^A-Za-z0-9._-]', '_', run_id)}"


def output_staging_name(output_uri: str) -> str:
    """The staging folder of a push whose orchestrator gives its executor no run id (TFX's
    legacy launcher under Airflow, Vertex): named after the push's output folder, whose place
    (pipeline root, node, execution id) ML Metadata records before the executor starts. A hash
    keeps the name short and apart from another store's pushes into the same root."""
    return f"{TEMPORARY_PREFIX}{hashlib.sha256(output_uri.encode()).hexdigest()[:20]}"


def version_problems(version_dir: str, recorded_files: str | None) -> list[str]:
    """Why a pushed version folder no longer holds what was pushed (a file gone, changed by a
    single bit, or reached through a link); empty when it does. Files added since are not
    imgpipe's and no problem. Every file is read and compared with the
    SHA-256 recorded at the push. recorded_files: the PUSHED_FILES property (JSON); None for a
    push recorded without it (then the folder must hold a SavedModel with its variables)."""
    if serving_root.is_local(version_dir) and os.path.islink(version_dir):
        return ["the folder is a link now"]
    if not fileio.isdir(version_dir):
        return ["the folder is gone"]
    if recorded_files is None:
        missing = [n for n in (SAVED_MODEL_FILE, VARIABLES_INDEX) if not _exists(version_dir, n)]
        return [f"{name} is missing" for name in missing]
    expected = json.loads(recorded_files)
    found, linked = {}, []
    real_dir = os.path.realpath(version_dir) if serving_root.is_local(version_dir) else None
    for name in expected:
        path = os.path.join(version_dir, name)
        if (
            real_dir
            and os.path.lexists(path)
            and (os.path.islink(path) or os.path.realpath(path) != os.path.join(real_dir, name))
        ):
            linked.append(f"{name} is reached through a link")
        elif fileio.exists(path):
            found[name] = _size_and_digest(path)
    return (linked + manifest_problems(expected, found))[:5]


def serve_problems_in_fresh_process(model_dir: str) -> list[str]:
    """The serving probe's problems with model_dir, run in a new Python process that imports
    TensorFlow alone, as a model server would load it."""
    command = [sys.executable, "-m", "components.serving.serving_probe", model_dir]
    try:
        result = subprocess.run(
            command, capture_output=True, text=True, timeout=PROBE_TIMEOUT_SECONDS, check=False
        )
    except subprocess.TimeoutExpired:
        return [f"loading it took more than {PROBE_TIMEOUT_SECONDS} s"]
    LOGGER.info("serving probe of %s:\n%s", model_dir, result.stderr)
    if result.returncode != 0:
        tail = result.stderr.strip().splitlines()[-1:] or [f"exit status {result.returncode}"]
        return [f"the loading process failed: {tail[0]}"]
    return json.loads(result.stdout.strip().splitlines()[-1])["problems"]


def next_version(base_directory: str) -> str:
    """Seconds since the epoch, as TFX numbers versions, but always above every version there:
    a model server serves the highest number."""
    existing = [int(name) for name in _names(base_directory) if name.isdigit()]
    return str(max([int(time.time()), *(number + 1 for number in existing)]))


def push(
    model_dir: str, beside_dir: str, base_directory: str, staging: str
) -> tuple[str, str, dict[str, list]]:
    """Copies model_dir and, beside it, the files under beside_dir into a new version under
    base_directory, verifies and renames it into place: (version, its folder, its files).
    staging: the folder's name while it is copied and checked (staging_name), created here,
    never taken over. Raises PushError, leaving no folder behind, when the copy is incomplete
    (a full disk), does not serve, or the version folder appeared meanwhile."""
    expected = file_manifest(model_dir)
    beside = file_manifest(beside_dir)
    if clash := sorted(set(expected) & set(beside)):
        raise PushError(f"{beside_dir} holds {clash[0]}, a file of the model; nothing was pushed")
    expected.update(beside)
    temporary = os.path.join(base_directory, staging)
    with serving_root.locked(base_directory):
        fileio.makedirs(base_directory)
        if fileio.exists(temporary) or os.path.lexists(temporary):
            raise PushError(f"{temporary} exists already; nothing was pushed")
        fileio.mkdir(temporary)
    try:
        _copy_into(model_dir, temporary)
        _copy_into(beside_dir, temporary)
        files = file_manifest(temporary)
        problems = manifest_problems(expected, files)
        if problems:
            raise PushError(f"the copy in {temporary} is incomplete: {'; '.join(problems)}")
        problems = serve_problems_in_fresh_process(temporary)
        if problems:
            raise PushError(f"the copy in {temporary} does not serve: {'; '.join(problems)}")
        with serving_root.locked(base_directory):
            version = next_version(base_directory)
            destination = os.path.join(base_directory, version)
            if fileio.exists(destination) or os.path.lexists(destination):
                raise PushError(f"{destination} already exists; nothing was pushed")
            fileio.rename(temporary, destination, overwrite=False)
    finally:
        _remove_own(temporary, base_directory)
    return version, destination, files


def _copy_into(source: str, target: str) -> None:
    """Copies the files under source into the folder target, overwriting nothing (TFX's
    copy_dir first deletes the target recursively, following links)."""
    for directory, _, names in fileio.walk(source):
        into = os.path.join(target, os.path.relpath(directory, source))
        fileio.makedirs(into)
        for name in names:
            fileio.copy(os.path.join(directory, name), os.path.join(into, name), overwrite=False)


def _remove_own(temporary: str, base_directory: str) -> None:
    """Removes the staging folder this push created, when it is still there."""
    if not serving_root.is_local(temporary):
        if fileio.exists(temporary):
            fileio.rmtree(temporary)
        return
    with serving_root.locked(base_directory):
        serving_root.remove_staged(temporary, base_directory)


class Executor(tfx_pusher.Executor):
    """TFX's Pusher (blessings, the archived copy, the PushedModel properties) with a push
    that is verified before it is in place, and fails instead of skipping."""

    def Do(self, input_dict, output_dict, exec_properties) -> None:  # noqa: N802  TFX's name
        pushed_model = artifact_utils.get_single_instance(
            output_dict[standard_component_specs.PUSHED_MODEL_KEY]
        )
        if not self.CheckBlessing(input_dict):
            pushed_model.set_int_custom_property(PUSHED, 0)
            return
        destination = pusher_pb2.PushDestination()
        proto_utils.json_to_proto(
            exec_properties[standard_component_specs.PUSH_DESTINATION_KEY], destination
        )
        if destination.WhichOneof("destination") != "filesystem":
            raise PushError("imgpipe pushes to a filesystem destination only")
        model_dir = self.GetModelPath(input_dict)
        base_directory = destination.filesystem.base_directory
        if "://" not in base_directory:  # recorded absolute: a store answers from any folder
            base_directory = os.path.abspath(base_directory)
        # The archived copy TFX keeps comes first, so that the rename into place is the last step
        # before TFX records the push: a kill leaves an unrecorded version only in between.
        io_utils.copy_dir(model_dir, pushed_model.uri)
        run_id = self._context.pipeline_run_id if self._context else None
        staging = staging_name(run_id) if run_id else output_staging_name(pushed_model.uri)
        beside_dir = artifact_utils.get_single_uri(input_dict[BESIDE_KEY])
        version, version_dir, files = push(model_dir, beside_dir, base_directory, staging)
        LOGGER.info("model %s pushed to %s", model_dir, version_dir)
        pushed_model.set_int_custom_property(PUSHED, 1)
        pushed_model.set_string_custom_property(DESTINATION, version_dir)
        pushed_model.set_string_custom_property(VERSION, version)
        pushed_model.set_string_custom_property(PUSHED_FILES, json.dumps(files, sort_keys=True))


class PusherSpec(standard_component_specs.PusherSpec):
    INPUTS = {
        **standard_component_specs.PusherSpec.INPUTS,
        BESIDE_KEY: component_spec.ChannelParameter(type=ModelCard),
    }


class Pusher(base_component.BaseComponent):
    """TFX's Pusher, with the ModelCard folder (what goes beside the model) as an input and the
    executor above: the card runs before the push, so the version is whole when it appears."""

    SPEC_CLASS = PusherSpec
    EXECUTOR_SPEC = executor_spec.ExecutorClassSpec(Executor)

    def __init__(
        self,
        model: channel.BaseChannel,
        model_blessing: channel.BaseChannel,
        infra_blessing: channel.BaseChannel,
        model_card: channel.BaseChannel,
        base_directory: str,
        custom_config: dict,
    ):
        destination = pusher_pb2.PushDestination(
            filesystem=pusher_pb2.PushDestination.Filesystem(base_directory=base_directory)
        )
        super().__init__(
            spec=PusherSpec(
                model=model,
                model_blessing=model_blessing,
                infra_blessing=infra_blessing,
                model_card=model_card,
                push_destination=destination,
                custom_config=json_utils.dumps(custom_config),
                pushed_model=channel.Channel(type=standard_artifacts.PushedModel),
            )
        )


def _names(folder: str) -> list[str]:
    return [name.rstrip("/") for name in fileio.listdir(folder)]


def _exists(folder: str, relative: str) -> bool:
    return fileio.exists(os.path.join(folder, relative))
