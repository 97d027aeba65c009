"""What a no-regression comparison was made on: the eval images of this span against those the
baseline was blessed on, counted by sha256, and read back from ML Metadata for a run record."""

import gzip
import json

from ml_metadata.metadata_store import metadata_store
from ml_metadata.proto import metadata_store_pb2 as mlmd_pb2

from components import metadata_keys
from pipeline.lineage import runs
from pipeline.lineage.eval_overlap import EvalOverlap, eval_overlap
from pipeline.lineage.store import MetadataGraph


def _rows(**splits):
    return [{"sha256": sha, "split": split} for split, shas in splits.items() for sha in shas]


def test_the_same_eval_set_is_the_baselines_own():
    rows = _rows(train=["a", "b"], eval=["c", "d"])
    overlap = eval_overlap(rows, rows)
    assert overlap == EvalOverlap(compared=2, kept=2, gone=0, trained_on=0)
    assert not overlap.changed
    assert overlap.describe() == "no-regression compared on 2 eval images, the baseline's own"


def test_removed_and_added_images_are_counted_and_said():
    baseline = _rows(train=["a", "b"], eval=["c", "d", "e"])
    current = _rows(train=["a", "b", "x"], eval=["c", "d", "y", "z"])  # e removed, y and z new
    overlap = eval_overlap(current, baseline)
    assert (overlap.compared, overlap.kept, overlap.gone, overlap.new) == (4, 2, 1, 2)
    assert overlap.describe() == (
        "no-regression compared on 4 eval images: 1 of the baseline's are gone, 2 new"
    )


def test_eval_images_the_baseline_trained_on_are_named():
    # A manifest moved b from train to eval and c from eval to train.
    baseline = _rows(train=["a", "b"], eval=["c"])
    current = _rows(train=["a", "c"], eval=["b"])
    overlap = eval_overlap(current, baseline)
    assert (overlap.gone, overlap.new, overlap.trained_on) == (1, 1, 1)
    assert overlap.describe().endswith(
        ": 1 of the baseline's are gone, 1 new, 1 of them the baseline trained on"
    )


def _store():
    config = mlmd_pb2.ConnectionConfig()
    config.fake_database.SetInParent()
    store = metadata_store.MetadataStore(config)
    for name in ("Examples", metadata_keys.INGEST_REPORT_TYPE, "Model", "ModelEvaluation"):
        store.put_artifact_type(mlmd_pb2.ArtifactType(name=name))
    for name in ("ImageExampleGen", "Trainer", "Evaluator"):
        store.put_execution_type(mlmd_pb2.ExecutionType(name=name))
    return store


def _put(store, execution_type, inputs=(), outputs=()):
    """An execution with (key, artifact id) inputs and (key, type, uri) outputs; the ids made."""
    made = store.put_artifacts(
        [
            mlmd_pb2.Artifact(type_id=store.get_artifact_type(type_name).id, uri=uri)
            for _, type_name, uri in outputs
        ]
    )
    [execution_id] = store.put_executions(
        [mlmd_pb2.Execution(type_id=store.get_execution_type(execution_type).id)]
    )
    events = []
    for kind, pairs in (
        (mlmd_pb2.Event.INPUT, inputs),
        (mlmd_pb2.Event.OUTPUT, [(key, i) for (key, _, _), i in zip(outputs, made, strict=True)]),
    ):
        for key, artifact_id in pairs:
            event = mlmd_pb2.Event(type=kind, artifact_id=artifact_id, execution_id=execution_id)
            event.path.steps.add().key = key
            events.append(event)
    store.put_events(events)
    return made


def _span(store, folder, rows):
    """An ingest's Examples (its id) with its IngestReport and source index under folder."""
    folder.mkdir()
    with gzip.open(folder / "source_index.jsonl.gz", "wt") as handle:
        handle.writelines(json.dumps(row) + "\n" for row in rows)
    examples, _ = _put(
        store,
        "ImageExampleGen",
        outputs=[
            ("examples", "Examples", str(folder / "examples")),
            (metadata_keys.INGEST_REPORT_OUTPUT_KEY, metadata_keys.INGEST_REPORT_TYPE, str(folder)),
        ],
    )
    return examples


def test_a_run_record_reads_the_overlap_from_the_evaluators_inputs(tmp_path):
    store = _store()
    first = _span(store, tmp_path / "first", _rows(train=["a", "b"], eval=["c", "d"]))
    second = _span(store, tmp_path / "second", _rows(train=["a", "b"], eval=["c", "e", "f"]))
    [baseline] = _put(store, "Trainer", [("examples", first)], [("model", "Model", "m1")])
    [candidate] = _put(store, "Trainer", [("examples", second)], [("model", "Model", "m2")])
    inputs = [("examples", second), ("model", candidate), ("baseline_model", baseline)]
    [evaluation] = _put(store, "Evaluator", inputs, [("evaluation", "ModelEvaluation", "e")])
    [alone] = _put(store, "Evaluator", inputs[:2], [("evaluation", "ModelEvaluation", "e2")])

    graph = MetadataGraph(store)
    assert runs._eval_overlap(graph, evaluation) == {
        "compared": 3,
        "kept": 1,
        "gone": 1,
        "trained_on": 0,
    }
    assert runs._eval_overlap(graph, alone) is None  # no baseline model compared against
