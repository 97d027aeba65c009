"""Before a run: the pipeline's serving folder holds what ML Metadata says was pushed there.

A cached Pusher would report an earlier push again without looking at its folder. A push whose
version folder is gone, or no longer holds the files pushed (components/serving/pusher.py records
them), is marked DELETED in ML Metadata: TFX answers a component from its cache only when every
output
artifact is LIVE, so the Pusher of this run pushes again. Then what no push finished (temporary
folders of a stopped push, version folders without a whole SavedModel) is removed.
"""

from __future__ import annotations

import os

from ml_metadata.metadata_store import metadata_store
from ml_metadata.proto import metadata_store_pb2 as mlmd_pb2
from tfx.dsl.io import fileio

from components.serving import pusher


def repair_serving_folder(store: metadata_store.MetadataStore, base_directory: str) -> list[str]:
    """Marks the pushes under base_directory whose folder no longer holds them, removes the
    leftovers of unfinished pushes; one line per thing done, for the console."""
    lines = []
    base = os.path.abspath(base_directory).rstrip("/") + "/"
    for artifact in store.get_artifacts_by_type("PushedModel"):
        properties = artifact.custom_properties
        if (
            artifact.state != mlmd_pb2.Artifact.LIVE
            or pusher.PUSHED not in properties
            or properties[pusher.PUSHED].int_value != 1
            or pusher.DESTINATION not in properties
            or not properties[pusher.DESTINATION].string_value.startswith(base)
        ):
            continue
        destination = properties[pusher.DESTINATION].string_value
        recorded = (
            properties[pusher.PUSHED_FILES].string_value
            if pusher.PUSHED_FILES in properties
            else None
        )
        problems = pusher.version_problems(destination, recorded)
        if problems:
            artifact.state = mlmd_pb2.Artifact.DELETED
            store.put_artifacts([artifact])
            lines.append(
                f"pushed model {destination} no longer holds what was pushed "
                f"({'; '.join(problems)}): it is pushed again"
            )
    for leftover in pusher.leftovers(base_directory):
        fileio.rmtree(leftover)
        lines.append(f"removed {leftover}: a push that did not finish, or an incomplete model")
    return lines
