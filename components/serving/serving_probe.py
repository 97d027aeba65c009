"""Checks that an exported model serves correctly from stock TensorFlow; run by the serving check
in a fresh process of its own (serving_verification.py), so nothing the training process
imported can hide a model that only works there.

Two parts:
  stock_tensorflow_problems: every op in the SavedModel's graph and function library is one
    TensorFlow itself defines (an entry of tf.raw_ops: a custom op library loaded at run time
    registers its ops in the process, not there) and none calls back into the Python process
    that saved it (tf.py_function, tf.numpy_function: their callbacks die with that process);
    no object needs a Python class registered outside TensorFlow to be rebuilt. It names the
    cause of what would otherwise fail with a less telling error.
  probe: loads the model with tf.saved_model.load only (no Keras, no TFX), replays the warmup
    requests in assets.extra, checks every answer's outputs (names, dtypes, shapes,
    probabilities summing to 1, class names matching class ids), and measures load time and
    single-image latency.
"""

from __future__ import annotations

import dataclasses
import json
import os
import sys
import time

import numpy as np
import tensorflow as tf
from tensorflow.core.protobuf import saved_model_pb2

# TensorFlow exports no lookup of the classes registered to rebuild saved objects; this reads
# that registry and changes nothing.
from tensorflow.python.saved_model import registration

from components.evaluation import saved_model_cache
from components.training.serving_assets import (
    IMAGES_INPUT,
    read_label_names,
    read_warmup_requests,
    request_inputs,
)

# Ops whose kernel calls a Python function by a token that lives only in the saving process.
PROCESS_BOUND_OPS = frozenset({"PyFunc", "PyFuncStateless", "EagerPyFunc"})
OUTPUTS = {"class_ids": tf.int64, "class_names": tf.string, "probabilities": tf.float32}
PROBABILITY_SUM_TOLERANCE = 1e-4


def check_outputs(
    signature: str, outputs: dict[str, tf.Tensor], batch: int, label_names: list[str]
) -> list[str]:
    """Problems with one answer, each naming the signature and output; empty when it is right."""
    problems = []
    if set(outputs) != set(OUTPUTS):
        return [f"{signature}: outputs {sorted(outputs)}, expected {sorted(OUTPUTS)}"]
    for name, dtype in OUTPUTS.items():
        if outputs[name].dtype != dtype:
            problems.append(f"{signature}: {name} is {outputs[name].dtype.name}, not {dtype.name}")
    expected_shapes = {
        "class_ids": (batch,),
        "class_names": (batch,),
        "probabilities": (batch, len(label_names)),
    }
    for name, shape in expected_shapes.items():
        if tuple(outputs[name].shape) != shape:
            problems.append(
                f"{signature}: {name} has shape {tuple(outputs[name].shape)}, not {shape}"
            )
    if problems:
        return problems
    probabilities = outputs["probabilities"].numpy()
    sums = probabilities.sum(axis=1)
    if not np.all(np.abs(sums - 1.0) <= PROBABILITY_SUM_TOLERANCE):
        problems.append(f"{signature}: probabilities sum to {sums.tolist()}, not 1")
    ids = outputs["class_ids"].numpy()
    if not np.array_equal(ids, probabilities.argmax(axis=1)):
        problems.append(f"{signature}: class_ids {ids.tolist()} are not the most probable classes")
    names = [name.decode() for name in outputs["class_names"].numpy()]
    if names != [label_names[i] for i in ids]:
        problems.append(f"{signature}: class_names {names} do not match class_ids {ids.tolist()}")
    return problems


def saved_model_proto(model_dir: str) -> saved_model_pb2.SavedModel:
    """The SavedModel's saved_model.pb, parsed without loading the model."""
    saved_model = saved_model_pb2.SavedModel()
    graph_file = os.path.join(model_dir, tf.saved_model.SAVED_MODEL_FILENAME_PB)
    with tf.io.gfile.GFile(graph_file, "rb") as handle:
        saved_model.ParseFromString(handle.read())
    return saved_model


def stock_tensorflow_problems(model_dir: str) -> list[str]:
    """What in the SavedModel would fail, or behave otherwise, in a process that has only
    imported TensorFlow; empty when nothing would. Raises what parsing a broken file raises."""
    stock_ops = frozenset(name for name in dir(tf.raw_ops) if not name.startswith("_"))
    problems = set()
    for meta_graph in saved_model_proto(model_dir).meta_graphs:
        library = meta_graph.graph_def.library
        functions = {function.signature.name for function in library.function}
        nodes = [*meta_graph.graph_def.node, *(n for f in library.function for n in f.node_def)]
        for op in {node.op for node in nodes} - functions:
            if op in PROCESS_BOUND_OPS:
                problems.add(f"op {op} calls back into the Python process that saved the model")
            elif op not in stock_ops:
                problems.add(f"op {op} is not a TensorFlow op (a custom op library?)")
        for node in meta_graph.object_graph_def.nodes:
            registered = registration.get_registered_class(node.registered_name)
            if registered is not None and not registered.__module__.startswith("tensorflow."):
                problems.add(
                    f"object {node.registered_name!r} is rebuilt by {registered.__module__}, "
                    "which stock TensorFlow does not import"
                )
    return sorted(problems)


@dataclasses.dataclass(frozen=True)
class Replayed:
    """One warmup request replayed: its problems (empty when the answer is right)."""

    signature: str
    problems: list[str]
    inputs: dict[str, tf.Tensor]
    batch: int = 0
    milliseconds: float | None = None  # None when the request failed


def replay(signatures, request, label_names: list[str]) -> Replayed:
    """Sends one warmup PredictRequest to its signature and checks the answer."""
    name = request.model_spec.signature_name or "serving_default"
    if name not in signatures:
        return Replayed(name, [f"warmup request for missing signature {name!r}"], {})
    inputs = request_inputs(request)
    start = time.perf_counter()
    try:
        outputs = signatures[name](**inputs)
    except (tf.errors.OpError, TypeError, ValueError) as error:
        return Replayed(name, [f"{name}: request failed: {error}"], inputs)
    milliseconds = (time.perf_counter() - start) * 1000
    batch = int(next(iter(inputs.values())).shape[0])
    problems = check_outputs(name, outputs, batch, label_names)
    return Replayed(name, problems, inputs, batch, milliseconds)


def probe(model_dir: str, latency_requests: int) -> dict:
    """The serving report of the SavedModel in `model_dir`; its problems are empty only when it
    serves from stock TensorFlow and every warmup request gets a right answer."""
    try:
        problems = stock_tensorflow_problems(model_dir)
    except Exception as error:  # noqa: BLE001  whatever a broken file raises refuses the model
        return {"model_dir": model_dir, "problems": [f"does not load: {error}"]}
    if problems:
        return {"model_dir": model_dir, "problems": problems}
    try:
        loaded = saved_model_cache.load(model_dir)
        label_names = read_label_names(model_dir)
        requests = read_warmup_requests(model_dir)
    except Exception as error:  # noqa: BLE001  as above
        return {"model_dir": model_dir, "problems": [f"does not load: {error}"]}
    problems = [] if requests else ["no warmup requests in assets.extra"]
    single_image = None
    warmup_ms = []  # each warmup request's latency; the first pays what warmup exists to absorb
    for log in requests:
        answered = replay(loaded.model.signatures, log.predict_log.request, label_names)
        problems += answered.problems
        if answered.milliseconds is not None:
            warmup_ms.append(answered.milliseconds)
        if not answered.problems and IMAGES_INPUT in answered.inputs and answered.batch == 1:
            single_image = (loaded.model.signatures[answered.signature], answered.inputs)
    report = {
        "model_dir": model_dir,
        "load_seconds": loaded.load_seconds,
        "warmup_requests": len(requests),
        "warmup_request_ms": warmup_ms,
        "signatures": sorted(loaded.model.signatures),
        "problems": problems,
    }
    if single_image and not problems:
        report["latency_ms"] = single_image_latency(*single_image, latency_requests)
    return report


def single_image_latency(signature, inputs: dict, requests: int) -> dict:
    """p50 and p99 milliseconds of one-image requests, sent one after another."""
    signature(**inputs)  # the first call after load pays one-time costs; warmup's job
    times = []
    for _ in range(requests):
        start = time.perf_counter()
        signature(**inputs)["probabilities"].numpy()
        times.append((time.perf_counter() - start) * 1000)
    return {
        "p50": float(np.percentile(times, 50)),
        "p99": float(np.percentile(times, 99)),
        "requests": requests,
    }


def main(argv: list[str]) -> int:
    """`python -m components.serving.serving_probe MODEL_DIR`: the probe's report as one JSON line
    on stdout, from a process that has imported TensorFlow alone (the push's check)."""
    (model_dir,) = argv
    report = probe(model_dir, latency_requests=1)
    print(json.dumps(report))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
