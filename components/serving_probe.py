"""Loads an exported model the way a model server does and reports whether it serves correctly.

Run as `python -m components.serving_probe MODEL_DIR REPORT_JSON [LATENCY_REQUESTS]` in a fresh
process: plain TensorFlow (no Keras, no TFX), so nothing the training process imported or cached
can hide a model that only works where it was made. It replays the warmup requests in
assets.extra, checks every answer's outputs (names, dtypes, shapes, probabilities summing to 1,
class names matching class ids), and measures load time and single-image latency.
"""

from __future__ import annotations

import json
import sys
import time

import numpy as np
import tensorflow as tf

from components.trainer.serving_assets import (
    IMAGES_INPUT,
    read_label_names,
    read_warmup_requests,
    request_inputs,
)

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


def probe(model_dir: str, latency_requests: int) -> dict:
    start = time.perf_counter()
    loaded = tf.saved_model.load(model_dir)
    load_seconds = time.perf_counter() - start
    label_names = read_label_names(model_dir)
    requests = read_warmup_requests(model_dir)
    problems = [] if requests else ["no warmup requests in assets.extra"]
    single_image = None
    warmup_ms = []  # each warmup request's latency; the first pays what warmup exists to absorb
    for log in requests:
        request = log.predict_log.request
        name = request.model_spec.signature_name
        if name not in loaded.signatures:
            problems.append(f"warmup request for missing signature {name!r}")
            continue
        inputs = request_inputs(request)
        start = time.perf_counter()
        try:
            outputs = loaded.signatures[name](**inputs)
        except (tf.errors.OpError, TypeError, ValueError) as error:
            problems.append(f"{name}: request failed: {error}")
            continue
        warmup_ms.append((time.perf_counter() - start) * 1000)
        batch = int(next(iter(inputs.values())).shape[0])
        problems.extend(check_outputs(name, outputs, batch, label_names))
        if IMAGES_INPUT in inputs and batch == 1:
            single_image = (loaded.signatures[name], inputs)
    report = {
        "model_dir": model_dir,
        "load_seconds": load_seconds,
        "warmup_requests": len(requests),
        "warmup_request_ms": warmup_ms,
        "signatures": sorted(loaded.signatures),
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
    model_dir, report_path = argv[:2]
    latency_requests = int(argv[2]) if len(argv) > 2 else 200
    report = probe(model_dir, latency_requests)
    with open(report_path, "w") as handle:
        json.dump(report, handle, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
