"""Pushes a blessed model so that a served version folder is always whole and known to serve.

TFX's Pusher copies straight into `<base>/<version>/` (a kill or a full disk leaves half a
model there, which a model server may try to load), skips the copy when the folder exists yet
records the push, and never looks at the folder again. Here the model is copied into a hidden
temporary folder inside the serving root (model servers load numeric folders only), its files
are compared with the model's, it is loaded and answers its warmup requests in a fresh
process, and only then is it renamed into place: one step, on the same filesystem. A push that
did not happen raises, so it is never recorded as pushed. The files pushed (sizes and SHA-256)
are recorded on the PushedModel artifact, so a later run can tell that the folder still holds
them (`version_problems`) and push again when it does not.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import subprocess
import sys
import time
import uuid

import tensorflow as tf
from tfx.components.pusher import executor as tfx_pusher
from tfx.dsl.io import fileio
from tfx.proto import pusher_pb2
from tfx.types import artifact_utils, standard_component_specs
from tfx.utils import io_utils, proto_utils

from components.serving.versions import SAVED_MODEL_FILE, VARIABLES_INDEX

LOGGER = logging.getLogger(__name__)
TEMPORARY_PREFIX = ".pushing-"
# PushedModel custom properties: TFX's three, and the files a push wrote.
PUSHED, DESTINATION, VERSION = "pushed", "pushed_destination", "pushed_version"
PUSHED_FILES = "pushed_files"
PROBE_TIMEOUT_SECONDS = 900


class PushError(RuntimeError):
    """The model was not pushed; the message says why."""


def file_manifest(folder: str) -> dict[str, list]:
    """relative path -> [size, sha256] of every file under folder."""
    manifest = {}
    for directory, _, names in fileio.walk(folder):
        for name in names:
            path = os.path.join(directory, name)
            digest = hashlib.sha256()
            size = 0
            with fileio.open(path, "rb") as handle:
                while block := handle.read(1 << 20):
                    digest.update(block)
                    size += len(block)
            manifest[os.path.relpath(path, folder)] = [size, digest.hexdigest()]
    return manifest


def manifest_problems(expected: dict[str, list], found: dict[str, list]) -> list[str]:
    """How found differs from expected, one phrase per file (at most a few)."""
    problems = [f"{name} is missing" for name in sorted(set(expected) - set(found))]
    problems += [
        f"{name} differs ({found[name][0]} bytes, pushed {expected[name][0]})"
        for name in sorted(set(expected) & set(found))
        if found[name] != expected[name]
    ]
    problems += [f"{name} was not pushed" for name in sorted(set(found) - set(expected))]
    return problems[:5]


def version_problems(version_dir: str, recorded_files: str | None) -> list[str]:
    """Why a pushed version folder no longer holds what was pushed (a file gone, or of another
    size); empty when it does. Files added since (the model card, placed beside the model) are
    no problem. Sizes only, so that checking every push of a pipeline on each run costs a few
    stat calls, not reading the models. recorded_files: the PUSHED_FILES property (JSON); None
    for a push recorded without it (then the folder must hold a SavedModel with its
    variables)."""
    if not fileio.isdir(version_dir):
        return ["the folder is gone"]
    if recorded_files is None:
        missing = [n for n in (SAVED_MODEL_FILE, VARIABLES_INDEX) if not _exists(version_dir, n)]
        return [f"{name} is missing" for name in missing]
    expected = {name: [size] for name, (size, _) in json.loads(recorded_files).items()}
    found = {}
    for name in expected:
        path = os.path.join(version_dir, name)
        if fileio.exists(path):
            found[name] = [tf.io.gfile.stat(path).length]
    return manifest_problems(expected, found)


def leftovers(base_directory: str) -> list[str]:
    """Folders in a serving root that no push finished: temporary folders of a push that was
    stopped, and version folders without a SavedModel or its variables (a copy that was cut
    short, or files removed since)."""
    if not fileio.isdir(base_directory):
        return []
    found = []
    for name in sorted(_names(base_directory)):
        path = os.path.join(base_directory, name)
        if name.startswith(TEMPORARY_PREFIX):
            found.append(path)
        elif name.isdigit() and fileio.isdir(path):
            if not (_exists(path, SAVED_MODEL_FILE) and _exists(path, VARIABLES_INDEX)):
                found.append(path)
    return found


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


def push(model_dir: str, base_directory: str) -> tuple[str, str, dict[str, list]]:
    """Copies, verifies and renames model_dir into a new version under base_directory:
    (version, its folder, its files). Raises PushError, leaving no folder behind, when the copy
    is incomplete, does not serve, or the version folder appeared meanwhile."""
    fileio.makedirs(base_directory)
    temporary = os.path.join(base_directory, f"{TEMPORARY_PREFIX}{uuid.uuid4().hex}")
    try:
        io_utils.copy_dir(model_dir, temporary)
        files = file_manifest(temporary)
        problems = manifest_problems(file_manifest(model_dir), files)
        if problems:
            raise PushError(f"the copy in {temporary} is incomplete: {'; '.join(problems)}")
        problems = serve_problems_in_fresh_process(temporary)
        if problems:
            raise PushError(f"the copy in {temporary} does not serve: {'; '.join(problems)}")
        version = next_version(base_directory)
        destination = os.path.join(base_directory, version)
        if fileio.exists(destination):
            raise PushError(f"{destination} already exists; nothing was pushed")
        fileio.rename(temporary, destination, overwrite=False)
    finally:
        if fileio.exists(temporary):
            fileio.rmtree(temporary)
    return version, destination, files


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
        version, version_dir, files = push(model_dir, base_directory)
        LOGGER.info("model %s pushed to %s", model_dir, version_dir)
        pushed_model.set_int_custom_property(PUSHED, 1)
        pushed_model.set_string_custom_property(DESTINATION, version_dir)
        pushed_model.set_string_custom_property(VERSION, version)
        pushed_model.set_string_custom_property(PUSHED_FILES, json.dumps(files, sort_keys=True))


def _names(folder: str) -> list[str]:
    return [name.rstrip("/") for name in fileio.listdir(folder)]


def _exists(folder: str, relative: str) -> bool:
    return fileio.exists(os.path.join(folder, relative))
