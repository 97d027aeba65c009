"""Run records from stores written the way each orchestrator writes them, built by hand in an
in-memory ML Metadata store (the end-to-end runs are in test_lineage.py and, for Airflow,
test_airflow_runner.py)."""

from ml_metadata.metadata_store import metadata_store
from ml_metadata.proto import metadata_store_pb2 as mlmd_pb2

from pipeline.lineage import list_runs, run_record
from pipeline.lineage import store as names

PIPELINE = "imgpipe"


def _store() -> metadata_store.MetadataStore:
    config = mlmd_pb2.ConnectionConfig()
    config.fake_database.SetInParent()
    return metadata_store.MetadataStore(config)


def _type(store, kind, name, **properties):
    message = {"artifact": mlmd_pb2.ArtifactType, "execution": mlmd_pb2.ExecutionType}.get(
        kind, mlmd_pb2.ContextType
    )(name=name)
    for key in properties:
        message.properties[key] = mlmd_pb2.STRING
    put = {
        "artifact": store.put_artifact_type,
        "execution": store.put_execution_type,
        "context": store.put_context_type,
    }[kind]
    return put(message)


def _event(kind, key):
    event = mlmd_pb2.Event(type=kind)
    event.path.steps.add().key = key
    event.path.steps.add().index = 0
    return event


def legacy_run(store, run_id, baseline_id=None):
    """A run as TFX's legacy (Airflow) launcher records it: a 'run' context, the component id on
    each execution, and the resolver's baseline published as an OUTPUT under 'model'."""
    types = {t.name: t.id for t in store.get_artifact_types()}
    run = mlmd_pb2.Context(type_id=store.get_context_type(names.LEGACY_RUN_CONTEXT).id)
    run.name = f"{PIPELINE}.{run_id}"
    run.properties[names.LEGACY_PIPELINE_PROPERTY].string_value = PIPELINE
    run.properties[names.LEGACY_RUN_ID_PROPERTY].string_value = run_id
    [run.id] = store.put_contexts([run])
    made = mlmd_pb2.Artifact(type_id=types["Model"], state=mlmd_pb2.Artifact.LIVE, uri=run_id)
    for component, type_name in (  # the resolver first: a latest-blessed one needs no candidate
        ("baseline_model_resolver", names.RESOLVER_EXECUTION_TYPE),
        ("Trainer", "Trainer"),
    ):
        execution = mlmd_pb2.Execution(
            type_id=store.get_execution_type(type_name).id,
            last_known_state=mlmd_pb2.Execution.COMPLETE,
        )
        execution.properties[names.LEGACY_COMPONENT_PROPERTY].string_value = component
        if component == "Trainer":
            outputs = [(made, _event(mlmd_pb2.Event.OUTPUT, "model"))]
        elif baseline_id is not None:
            [baseline] = store.get_artifacts_by_id([baseline_id])
            outputs = [(baseline, _event(mlmd_pb2.Event.OUTPUT, "model"))]
        else:
            outputs = []
        store.put_execution(execution, outputs, [run])
    return max(a.id for a in store.get_artifacts_by_type("Model"))


def add_legacy_types(store) -> None:
    """The types TFX's legacy (Airflow) launcher registers for legacy_run's executions."""
    _type(store, "artifact", "Model")
    for name in ("Trainer", names.RESOLVER_EXECUTION_TYPE):
        _type(store, "execution", name, **{names.LEGACY_COMPONENT_PROPERTY: None})
    _type(
        store,
        "context",
        names.LEGACY_RUN_CONTEXT,
        **{names.LEGACY_PIPELINE_PROPERTY: None, names.LEGACY_RUN_ID_PROPERTY: None},
    )


def test_legacy_runs_are_listed_with_named_components_and_their_own_model():
    store = _store()
    add_legacy_types(store)
    first_model = legacy_run(store, "scheduled__2026-01-01")
    second_model = legacy_run(store, "scheduled__2026-01-02", baseline_id=first_model)

    newest, oldest = list_runs(store, PIPELINE, metrics=False)
    assert (newest.run_id, oldest.run_id) == ("scheduled__2026-01-02", "scheduled__2026-01-01")
    assert [c.node for c in newest.components] == ["baseline_model_resolver", "Trainer"]
    assert newest.pipeline == PIPELINE
    assert (newest.model_id, oldest.model_id) == (second_model, first_model)
    assert run_record(store, PIPELINE, "scheduled__2026-01-02").model_id == second_model
