"""Device-dependent choices: precision, XLA and the cluster role, from config, devices and
TF_CONFIG."""

import dataclasses
import json

import pytest
import tensorflow as tf

from components.training import runtime
from components.training.trainer_config import TrainerConfig


def test_a_cpu_trains_in_float32_without_xla_unless_asked(monkeypatch):
    monkeypatch.setattr(runtime, "cpu_has_native_bfloat16", lambda: False)
    config = TrainerConfig()
    assert runtime.accelerator_kind() == "cpu"
    assert runtime.choose_precision(config) == "float32"
    assert runtime.choose_jit_compile(config) is False
    forced = dataclasses.replace(config, precision="mixed_bfloat16", jit_compile=True)
    assert runtime.choose_precision(forced) == "mixed_bfloat16"
    assert runtime.choose_jit_compile(forced) is True


def test_a_cpu_with_native_bfloat16_trains_in_mixed_bfloat16_unless_asked(monkeypatch):
    monkeypatch.setattr(runtime, "cpu_has_native_bfloat16", lambda: True)
    assert runtime.choose_precision(TrainerConfig()) == "mixed_bfloat16"
    assert runtime.choose_jit_compile(TrainerConfig()) is False  # native units need no XLA
    forced = TrainerConfig(precision="float32")
    assert runtime.choose_precision(forced) == "float32"


def _tf_config(monkeypatch, cluster, task_type, index):
    tf_config = {"cluster": cluster, "task": {"type": task_type, "index": index}}
    monkeypatch.setenv("TF_CONFIG", json.dumps(tf_config))


@pytest.mark.parametrize(
    ("cluster", "task_type", "index", "workers", "chief", "position"),
    [
        ({"worker": ["a:1", "b:2"]}, "worker", 0, 2, True, 0),
        ({"worker": ["a:1", "b:2"]}, "worker", 1, 2, False, 1),
        ({"chief": ["c:0"], "worker": ["a:1"]}, "worker", 0, 2, False, 1),
        ({"chief": ["c:0"], "worker": ["a:1"]}, "chief", 0, 2, True, 0),
        ({"worker": ["a:1"]}, "worker", 0, 1, True, 0),
    ],
)
def test_cluster_role_from_tf_config(
    monkeypatch, cluster, task_type, index, workers, chief, position
):
    _tf_config(monkeypatch, cluster, task_type, index)
    assert runtime.cluster_workers() == workers
    assert runtime.is_chief_task() is chief
    assert runtime.worker_index() == position


def test_no_tf_config_is_a_single_chief(monkeypatch):
    monkeypatch.delenv("TF_CONFIG", raising=False)
    assert runtime.cluster_workers() == 1 and runtime.is_chief_task()
    assert runtime.worker_index() == 0


CPUINFO = """processor\t: 0
vendor_id\t: GenuineIntel
model name\t: Intel(R) Xeon(R) Platinum 8480C
flags\t\t: fpu vme sse2 avx2 avx512f avx512bw {extra} arch_capabilities
bogomips\t: 4000.00

processor\t: 1
flags\t\t: fpu vme sse2 avx2 avx512f avx512bw {extra} arch_capabilities
"""


@pytest.mark.parametrize(
    ("extra", "native"),
    [
        ("amx_bf16 amx_tile amx_int8", True),
        ("avx512_bf16 avx512_vnni", True),
        ("avx512_vnni amx_tile", False),  # AMX without its bf16 unit, VNNI: int8 only
        ("", False),
    ],
)
def test_native_bfloat16_is_read_from_the_cpu_flags(tmp_path, extra, native):
    cpuinfo = tmp_path / "cpuinfo"
    cpuinfo.write_text(CPUINFO.format(extra=extra))
    assert runtime.cpu_has_native_bfloat16(str(cpuinfo)) is native


def test_no_cpu_flags_to_read_is_not_native_bfloat16(tmp_path):
    assert runtime.cpu_has_native_bfloat16(str(tmp_path / "missing")) is False
    arm = tmp_path / "cpuinfo"  # Arm names features, not flags: only x86 flags are read
    arm.write_text("processor\t: 0\nFeatures\t: fp asimd bf16 i8mm\n")
    assert runtime.cpu_has_native_bfloat16(str(arm)) is False


class _Contexts:
    """A dataset_fn that keeps the InputContexts it is called with."""

    def __init__(self):
        self.seen = []

    def __call__(self, context: tf.distribute.InputContext) -> tf.data.Dataset:
        self.seen.append(context)
        return tf.data.Dataset.range(4).batch(2)


def _context_fields(context: tf.distribute.InputContext) -> tuple[int, int, int]:
    return context.num_input_pipelines, context.input_pipeline_id, context.num_replicas_in_sync


def test_a_single_cpu_replica_iterates_its_dataset_directly(monkeypatch):
    monkeypatch.delenv("TF_CONFIG", raising=False)
    dataset_fn = _Contexts()
    iterator = runtime.training_iterator(tf.distribute.MirroredStrategy(["/cpu:0"]), dataset_fn)
    assert not isinstance(iterator, tf.distribute.DistributedIterator)
    assert [_context_fields(c) for c in dataset_fn.seen] == [(1, 0, 1)]
    assert next(iterator).numpy().tolist() == [0, 1]


class _TwoReplicas:
    """What the iterator reads of a strategy with two replicas in all (MultiWorkerMirroredStrategy
    cannot start in a process that runs TensorFlow already); its own input is a list."""

    num_replicas_in_sync = 2

    def distribute_datasets_from_function(self, dataset_fn):
        return ["distributed"]


def test_each_cpu_worker_of_a_cluster_iterates_its_own_share_directly(monkeypatch):
    _tf_config(monkeypatch, {"worker": ["a:1", "b:2"]}, "worker", 1)
    dataset_fn = _Contexts()
    iterator = runtime.training_iterator(_TwoReplicas(), dataset_fn)
    assert [_context_fields(c) for c in dataset_fn.seen] == [(2, 1, 2)]
    assert next(iterator).numpy().tolist() == [0, 1]


def test_accelerators_and_several_replicas_a_worker_get_the_strategy_s_input(monkeypatch):
    monkeypatch.delenv("TF_CONFIG", raising=False)
    assert next(runtime.training_iterator(_TwoReplicas(), _Contexts())) == "distributed"
    monkeypatch.setattr(runtime, "accelerator_kind", lambda: "gpu")
    iterator = runtime.training_iterator(tf.distribute.MirroredStrategy(["/cpu:0"]), _Contexts())
    assert isinstance(iterator, tf.distribute.DistributedIterator)
