"""The store walks' own helpers, against TFX's."""

from ml_metadata.proto import metadata_store_pb2 as mlmd_pb2
from tfx.orchestration.portable.mlmd import event_lib

from pipeline.lineage import store
from pipeline.lineage.store import has_key


def test_has_key_answers_as_tfx_event_lib():
    event = mlmd_pb2.Event(type=mlmd_pb2.Event.INPUT)
    for key in ("model", "baseline_model"):  # one model given under two keys
        event_lib.add_event_path(event, key, 0)
    for key in ("model", "baseline_model", "examples"):
        assert has_key(event, key) == event_lib.contains_key(event, key)


def test_legacy_run_names_are_tfx_legacy_metadata_names():
    from tfx.dsl.components.common import resolver
    from tfx.orchestration import metadata as legacy

    assert store.LEGACY_RUN_CONTEXT == legacy._CONTEXT_TYPE_PIPELINE_RUN
    assert store.LEGACY_PIPELINE_PROPERTY == legacy._CONTEXT_TYPE_KEY_PIPELINE_NAME
    assert store.LEGACY_RUN_ID_PROPERTY == legacy._CONTEXT_TYPE_KEY_RUN_ID
    assert store.LEGACY_COMPONENT_PROPERTY == legacy._CONTEXT_TYPE_KEY_COMPONENT_ID
    resolver_type = f"{resolver.Resolver.__module__}.{resolver.Resolver.__name__}"
    assert store.RESOLVER_EXECUTION_TYPE == resolver_type
