"""`imgpipe audit` over the newest ingest a pipeline run recorded, and its record beside it, on a
copy of the shared two-run store (the audit writes to the store)."""

import re
import shutil

import pytest
from ml_metadata.proto import metadata_store_pb2 as mlmd_pb2

from components import metadata_keys
from pipeline import exit_codes
from pipeline.lineage import examples_lineage
from pipeline.lineage.store import MetadataGraph
from pipeline.runners.local import open_store
from pipeline.validation import audit_record
from tests.pipeline.tiny_pipeline import LABELS
from tests.pipeline.two_run_store import ACCEPTED

pytestmark = pytest.mark.slow  # every test reads the shared two-run store: two pipeline runs


def test_the_newest_ingest_is_the_pipelines_examples_with_their_shards_and_classes(two_runs):
    dataset = audit_record.newest_ingest(two_runs.store, two_runs.config.name)
    graph = MetadataGraph(two_runs.store)
    assert graph.artifact_types[graph.artifact(dataset.examples_id).type_id] == "Examples"
    assert dataset.data.label_names == list(LABELS)
    assert dataset.data.files and all("/Split-" in path for path in dataset.data.files)
    assert sum(dataset.data.ingest["accepted_per_split"].values()) == ACCEPTED


def test_a_pipeline_that_never_ingested_has_nothing_to_audit(two_runs):
    with pytest.raises(audit_record.NothingToAudit, match="'other' has no ingest"):
        audit_record.newest_ingest(two_runs.store, "other")


def test_audit_of_the_store_records_a_data_health_made_from_the_newest_examples(
    two_runs, tmp_path, capfd
):
    store_copy = str(tmp_path / "metadata.db")
    shutil.copy(two_runs.config.metadata_path, store_copy)
    argv = ["audit", "--build-dir", str(tmp_path / "build"), "--mlmd-sqlite", store_copy]
    from pipeline.cli import main

    assert main([*argv, "--preset", "runlocal", "--folds", "2"]) == exit_codes.OK
    out = capfd.readouterr().out
    # On this tiny store the audit may score at chance and list none; either way it counts them all.
    assert re.search(rf"likely mislabelled images: (\d+|none listed) of {ACCEPTED}\b", out), out
    # The ingest's rejections and the audit's findings, each on one line by kind.
    assert re.search(r"^  rejected \d+", out, re.MULTILINE), out
    assert re.search(r"^found \d+", out, re.MULTILINE), out

    store = open_store(store_copy)
    examples_id = audit_record.newest_ingest(store, two_runs.config.name).examples_id
    [audit] = store.get_executions_by_type(metadata_keys.AUDIT_EXECUTION_TYPE)
    events = store.get_events_by_execution_ids([audit.id])
    read = [e.artifact_id for e in events if e.type == mlmd_pb2.Event.INPUT]
    assert read == [examples_id]
    [made] = [e.artifact_id for e in events if e.type == mlmd_pb2.Event.OUTPUT]
    graph = MetadataGraph(store)
    assert graph.artifact_types[graph.artifact(made).type_id] == metadata_keys.DATA_HEALTH_TYPE
    # The Examples' lineage is unchanged by the audit: no model is trained on them by it.
    assert len(examples_lineage(store, examples_id).models) == len(
        examples_lineage(two_runs.store, examples_id).models
    )
