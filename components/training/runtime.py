"""Device-dependent choices, made once per training run: threads, GPU memory, distribution,
precision and XLA.

Order matters: thread pools, GPU memory growth and MultiWorkerMirroredStrategy must be set before
TensorFlow's runtime starts in the process, so `make_strategy` is the first thing a run calls.
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Callable, Iterator

import tensorflow as tf

from components.training.trainer_config import TrainerConfig

MIN_MIXED_FLOAT16_CAPABILITY = (7, 0)  # Volta: the first GPUs with float16 tensor cores
# Linux /proc/cpuinfo flags of x86 CPUs that compute bfloat16 in hardware (Sapphire Rapids' AMX,
# Cooper Lake's and Zen 4's AVX512-BF16); without them TensorFlow emulates bfloat16.
NATIVE_BFLOAT16_FLAGS = frozenset({"amx_bf16", "avx512_bf16"})
CPUINFO_PATH = "/proc/cpuinfo"


def configure_runtime(config: TrainerConfig) -> None:
    """Thread pool sizes and GPU memory growth; each applied only while TF has not started, since
    TensorFlow refuses to change them afterwards (a process that trained once keeps its pools)."""
    for gpu in tf.config.list_physical_devices("GPU"):
        try:
            tf.config.experimental.set_memory_growth(gpu, True)
        except RuntimeError:  # TF already started: growth keeps whatever it was set to then
            logging.info("GPU memory growth unchanged: TensorFlow has already started")
    for name, setter, getter in (
        (
            "inter_op_threads",
            tf.config.threading.set_inter_op_parallelism_threads,
            tf.config.threading.get_inter_op_parallelism_threads,
        ),
        (
            "intra_op_threads",
            tf.config.threading.set_intra_op_parallelism_threads,
            tf.config.threading.get_intra_op_parallelism_threads,
        ),
    ):
        wanted = getattr(config, name)
        if wanted and getter() != wanted:
            try:
                setter(wanted)
            except RuntimeError as error:
                raise RuntimeError(
                    f"{name}={wanted} cannot be applied: TensorFlow already started in this "
                    "process; set it in a fresh process (e.g. the TFX Trainer's own)"
                ) from error


def _tf_config() -> dict:
    return json.loads(os.environ.get("TF_CONFIG") or "{}")


def cluster_workers() -> int:
    """Workers (chief included) that TF_CONFIG names; 1 when it names none."""
    cluster = _tf_config().get("cluster", {})
    return sum(len(cluster.get(job, [])) for job in ("chief", "worker")) or 1


def is_chief_task() -> bool:
    """Whether this process is the cluster's chief (the 'chief' task, or worker 0 when there is
    none), read from TF_CONFIG without starting TensorFlow; True outside a cluster."""
    tf_config = _tf_config()
    task = tf_config.get("task", {})
    if cluster_workers() == 1 or not task:
        return True
    if "chief" in tf_config.get("cluster", {}):
        return task.get("type") == "chief"
    return task.get("type") == "worker" and int(task.get("index", 0)) == 0


def worker_index() -> int:
    """This process's place among the cluster's workers as MultiWorkerMirroredStrategy numbers
    them (the 'chief' task first, then the 'worker' tasks), read from TF_CONFIG; 0 outside a
    cluster."""
    tf_config = _tf_config()
    task = tf_config.get("task", {})
    if cluster_workers() == 1 or not task:
        return 0
    index = int(task.get("index", 0))
    if task.get("type") == "worker":
        return index + len(tf_config.get("cluster", {}).get("chief", []))
    return index


def make_strategy(config: TrainerConfig) -> tf.distribute.Strategy:
    """MultiWorkerMirroredStrategy when TF_CONFIG names several workers; otherwise
    MirroredStrategy over every local GPU, or else every logical CPU (one, unless configured)."""
    configure_runtime(config)
    if cluster_workers() > 1:
        return tf.distribute.MultiWorkerMirroredStrategy()
    devices = tf.config.list_logical_devices("GPU") or tf.config.list_logical_devices("CPU")
    return tf.distribute.MirroredStrategy([device.name for device in devices])


def training_iterator(
    strategy: tf.distribute.Strategy,
    dataset_fn: Callable[[tf.distribute.InputContext], tf.data.Dataset],
) -> Iterator:
    """The iterator of the training batches `dataset_fn` makes for this worker. A worker with one
    CPU replica (one process of a MultiWorkerMirroredStrategy cluster, or a single replica)
    iterates its dataset directly, with the InputContext the strategy would give it: the
    strategies hand batches over through a MultiDeviceIterator whose per-device dataset
    TensorFlow 2.16 always autotunes, and deleting that iterator waits for the tuning thread's
    sleep (up to 60 s) after long runs. In a cluster one worker then exits while another still
    waits, and the coordination service reports the first as a failed task (a heartbeat
    timeout). Replicas on accelerators, or several in a process, get the strategy's input."""
    if strategy.num_replicas_in_sync != cluster_workers() or accelerator_kind() != "cpu":
        return iter(strategy.distribute_datasets_from_function(dataset_fn))
    context = tf.distribute.InputContext(
        num_input_pipelines=cluster_workers(),
        input_pipeline_id=worker_index(),
        num_replicas_in_sync=strategy.num_replicas_in_sync,
    )
    return iter(dataset_fn(context))


def accelerator_kind() -> str:
    """'tpu', 'gpu' or 'cpu': what the training step runs on in this process."""
    if tf.config.list_logical_devices("TPU"):
        return "tpu"
    return "gpu" if tf.config.list_logical_devices("GPU") else "cpu"


def cpu_has_native_bfloat16(cpuinfo_path: str = CPUINFO_PATH) -> bool:
    """Whether this CPU computes bfloat16 natively: its first `flags` line in Linux's cpuinfo names
    amx_bf16 or avx512_bf16. False where that cannot be read (other systems): emulated bfloat16
    trains many times slower than float32 (benchmarks/precision_bench.py measures it)."""
    try:
        with open(cpuinfo_path) as handle:
            for line in handle:
                key, _, value = line.partition(":")
                if key.strip() == "flags":
                    return not NATIVE_BFLOAT16_FLAGS.isdisjoint(value.split())
    except OSError:
        pass
    return False


def choose_precision(config: TrainerConfig) -> str:
    """The tf_keras mixed-precision policy name for this run."""
    if config.precision != "auto":
        return config.precision
    kind = accelerator_kind()
    if kind == "tpu":
        return "mixed_bfloat16"
    if kind == "gpu":
        capabilities = [
            tf.config.experimental.get_device_details(gpu).get("compute_capability", (0, 0))
            for gpu in tf.config.list_physical_devices("GPU")
        ]
        if min(capabilities) >= MIN_MIXED_FLOAT16_CAPABILITY:
            return "mixed_float16"
        return "float32"
    # Where native, bfloat16 keeps float32's accuracy at a higher step rate
    # (benchmarks/precision_bench.py measures both).
    return "mixed_bfloat16" if cpu_has_native_bfloat16() else "float32"


def choose_jit_compile(config: TrainerConfig) -> bool:
    """XLA for the training step: as configured, else on for accelerators and off on CPUs."""
    if config.jit_compile is not None:
        return config.jit_compile
    return accelerator_kind() != "cpu"


def device_names(strategy: tf.distribute.Strategy) -> list[str]:
    """The devices the replicas of this worker run on."""
    return list(strategy.extended.worker_devices)
