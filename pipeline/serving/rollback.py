"""`imgpipe models`: the versions of a serving folder, and a rollback pinning one of them.

The pin is a file in the serving folder (components/serving/versions.py reads it), so every
reader honours it, a server that sees only the folder included; the pipeline's ML Metadata
store records each rollback too. A run pushes its version as usual; while a pin stands, the
pinned version keeps serving and the run says so. Only ml_metadata is imported.
"""

from __future__ import annotations

import dataclasses
import os

from ml_metadata.metadata_store import metadata_store
from ml_metadata.proto import metadata_store_pb2 as mlmd_pb2

from components import metadata_keys
from components.serving import serving_root
from components.serving.versions import pinned_version, served_version, whole_versions
from pipeline.lineage.models import find_model, model_lineage
from pipeline.lineage.store import LineageError


class RollbackError(ValueError):
    """A rollback that was refused; the message says why."""


@dataclasses.dataclass(frozen=True)
class VersionRow:
    name: str  # the folder's name: a version number, or one moved aside (`N.broken`)
    state: str  # serving, kept, moved aside, incomplete
    pinned: bool
    accuracy: float | None = None  # the pushed model's evaluation, when the store has it


def list_versions(base_directory: str) -> list[VersionRow]:
    """Every version folder of base_directory, newest first, with its state."""
    try:
        names = os.listdir(base_directory)
    except OSError:
        return []
    whole = set(whole_versions(base_directory))
    served, pinned = served_version(base_directory), pinned_version(base_directory)
    rows = []
    for name in names:
        number = name.split(".", 1)[0]
        if not number.isdigit():
            continue
        if name != number:
            if name[len(number) :].startswith(serving_root.ASIDE_SUFFIX):
                rows.append(VersionRow(name, "moved aside", False))
            continue
        version = int(name)
        state = "serving" if version == served else "kept" if version in whole else "incomplete"
        rows.append(VersionRow(name, state, version == pinned))
    return sorted(rows, key=lambda row: (int(row.name.split(".", 1)[0]), row.name), reverse=True)


def format_versions(base_directory: str, rows: list[VersionRow]) -> str:
    if not rows:
        return f"{base_directory} holds no versions"
    lines = [f"versions under {base_directory}:"]
    for row in rows:
        mark = "*" if row.state == "serving" else " "
        pinned = " (pinned by a rollback)" if row.pinned else ""
        accuracy = "" if row.accuracy is None else f"eval accuracy {row.accuracy:.3f}  "
        lines.append(f"{mark} {row.name:<20} {accuracy}{row.state}{pinned}")
    return "\n".join(lines)


def roll_back(base_directory: str, version: str | None) -> str:
    """Pins version (None: removes the pin, so the highest whole version serves); the line to
    show: which version serves now. Raises RollbackError for a version that is not whole, or a
    pin file imgpipe did not write."""
    if not serving_root.is_real_directory(base_directory):
        raise RollbackError(f"{base_directory} is not a serving folder (no pushed model yet)")
    if version is not None and not version.isdigit():
        raise RollbackError(f"{version!r} is not a version number")
    if version is not None and int(version) not in whole_versions(base_directory):
        raise RollbackError(
            f"version {version} is not a whole SavedModel under {base_directory} (missing, "
            "incomplete or moved aside); `imgpipe models list` shows the versions"
        )
    try:
        with serving_root.locked(base_directory):
            if version is None:
                serving_root.unpin(base_directory)
            else:
                serving_root.pin(base_directory, int(version))
    except serving_root.NotOurs as error:
        raise RollbackError(str(error)) from error
    served = served_version(base_directory)
    serves = "no version" if served is None else f"version {served}"
    how = "pinned" if version is not None else "the highest whole one"
    return f"{serves} of {base_directory} serves now ({how})"


def pinned_note(base_directory: str) -> str | None:
    """One line when a rollback keeps a newer whole version from serving, else None."""
    pinned, versions = pinned_version(base_directory), whole_versions(base_directory)
    if pinned not in versions or versions[0] == pinned:
        return None
    return (
        f"rolled back to {pinned}: version {versions[0]} pushed but not served; "
        "imgpipe models rollback --latest to serve it"
    )


def with_accuracy(
    store: metadata_store.MetadataStore, base_directory: str, rows: list[VersionRow]
) -> list[VersionRow]:
    """rows with the evaluation accuracy of the pushed model each folder holds, when the store
    recorded its push."""
    answered = []
    for row in rows:
        accuracy = None
        try:
            folder = os.path.join(base_directory, row.name)
            lineage = model_lineage(store, find_model(store, folder))
            accuracy = lineage.evaluation.accuracy if lineage.evaluation else None
        except LineageError:
            pass  # pushed by another store, or by hand
        answered.append(dataclasses.replace(row, accuracy=accuracy))
    return answered


def record_rollback(
    store: metadata_store.MetadataStore, base_directory: str, version: int | None
) -> int:
    """Records a rollback (version None: the pin removed) as an execution; returns its id."""
    execution_type = store.put_execution_type(
        mlmd_pb2.ExecutionType(name=metadata_keys.ROLLBACK_EXECUTION_TYPE)
    )
    execution = mlmd_pb2.Execution(
        type_id=execution_type, last_known_state=mlmd_pb2.Execution.COMPLETE
    )
    properties = execution.custom_properties
    properties[metadata_keys.SERVING_FOLDER_PROPERTY].string_value = os.path.abspath(base_directory)
    properties[metadata_keys.PINNED_VERSION_PROPERTY].int_value = version or 0
    (execution_id,) = store.put_executions([execution])
    return execution_id
