"""`imgpipe serve` under load: one-image requests over HTTP on 127.0.0.1, against the same model
called in-process and against `imgpipe predict` on one file.

The model and the in-process figures are serving_bench's (the default trainer config's
architecture, the serving check's probe in a fresh process); the image is the export's own
warmup JPEG, the one the probe times. A load generator in this process keeps CONCURRENCY
requests in flight, each on its own keep-alive connection, so the server's latency percentiles
and throughput at each level come from the client's side, as a caller sees them; the server runs
with its default batching. What batching saves in the model is measured in-process: one call on
a batch of BATCH images against BATCH one-image calls.

Settings (environment):
  BENCH_SERVE_REQUESTS  requests per concurrency level (default 400)
"""

from __future__ import annotations

import base64
import http.client
import json
import os
import re
import signal
import subprocess
import sys
import threading
import time

import numpy as np

from benchmarks.serving_bench import export_saved_model, probe_in_fresh_process

TITLE = "`imgpipe serve` over HTTP"
REQUESTS = int(os.environ.get("BENCH_SERVE_REQUESTS", "400"))
CONCURRENCY = (1, 8, 32)
BATCH = 8
NAME = "bench"
VERSION = "1"


def _start_server(base: str) -> tuple[subprocess.Popen, int]:
    command = [sys.executable, "-m", "pipeline.cli", "serve", "--model", base, "--port", "0"]
    server = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    first = server.stdout.readline()
    found = re.search(r"127\.0\.0\.1:(\d+)/", first)
    if not found:
        server.kill()
        raise RuntimeError(f"imgpipe serve did not start: {first}{server.stderr.read()[-2000:]}")
    return server, int(found.group(1))


def _load(port: int, body: bytes, concurrency: int, requests: int) -> tuple[list[float], float]:
    """Each request's milliseconds and the wall seconds of all, CONCURRENCY at a time."""
    latencies: list[float] = []
    per_client = max(1, requests // concurrency)
    failures: list[str] = []

    def client() -> None:
        connection = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
        for _ in range(per_client):
            start = time.perf_counter()
            connection.request("POST", f"/v1/models/{NAME}:predict", body)
            response = connection.getresponse()
            answer = response.read()
            latencies.append((time.perf_counter() - start) * 1000)
            if response.status != 200:
                failures.append(answer.decode()[:200])
        connection.close()

    threads = [threading.Thread(target=client) for _ in range(concurrency)]
    started = time.perf_counter()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    if failures:
        raise RuntimeError(f"{len(failures)} requests failed: {failures[0]}")
    return latencies, time.perf_counter() - started


def _batching(model_dir: str, image: bytes) -> tuple[float, float]:
    """Milliseconds per image: one-image calls, and calls on BATCH images."""
    import tensorflow as tf

    signature = tf.saved_model.load(model_dir).signatures["serving_images"]
    timed = {}
    for size in (1, BATCH):
        images = tf.constant([image] * size)
        signature(images=images)
        start = time.perf_counter()
        for _ in range(max(1, 200 // size)):
            signature(images=images)["probabilities"].numpy()
        timed[size] = (time.perf_counter() - start) * 1000 / (max(1, 200 // size) * size)
    return timed[1], timed[BATCH]


def _predict_one(model_dir: str, image_path: str) -> float:
    """Wall seconds of `imgpipe predict` on one file, a whole process as a user runs it."""
    started = time.perf_counter()
    command = [sys.executable, "-m", "pipeline.cli", "predict", "--model", model_dir, image_path]
    subprocess.run(command, check=True, capture_output=True)
    return time.perf_counter() - started


def run(workdir: str) -> list[dict]:
    from components.training.serving_assets import warmup_image

    base = os.path.join(workdir, "serve_bench", NAME)
    model_dir = os.path.join(base, VERSION)
    image_size, _ = export_saved_model(model_dir)
    image = warmup_image(image_size)
    image_path = os.path.join(workdir, "serve_bench", "image.jpg")
    with open(image_path, "wb") as handle:
        handle.write(image)
    probe = probe_in_fresh_process(model_dir)
    single_ms, batched_ms = _batching(model_dir, image)
    body = json.dumps(
        {
            "signature_name": "serving_images",
            "instances": [{"b64": base64.b64encode(image).decode()}],
        }
    ).encode()
    server, port = _start_server(base)
    records = []
    try:
        _load(port, body, 1, 20)  # connections and the first requests' one-time costs
        for concurrency in CONCURRENCY:
            latencies, wall = _load(port, body, concurrency, REQUESTS)
            prefix = f"serve.http.c{concurrency}"
            records += [
                {
                    "name": f"{prefix}.p50",
                    "value": float(np.percentile(latencies, 50)),
                    "unit": "ms",
                },
                {
                    "name": f"{prefix}.p99",
                    "value": float(np.percentile(latencies, 99)),
                    "unit": "ms",
                },
                {"name": f"{prefix}.throughput", "value": len(latencies) / wall, "unit": "req/s"},
            ]
    finally:
        server.send_signal(signal.SIGINT)
        server.wait(timeout=60)
    in_process = probe["latency_ms"]
    records += [
        {"name": "serve.in_process.p50", "value": in_process["p50"], "unit": "ms"},
        {"name": "serve.in_process.p99", "value": in_process["p99"], "unit": "ms"},
        {
            "name": "serve.predict_one_file",
            "value": _predict_one(model_dir, image_path),
            "unit": "s",
        },
        {"name": "serve.batch1_per_image", "value": single_ms, "unit": "ms/image"},
        {
            "name": f"serve.batch{BATCH}_per_image",
            "value": batched_ms,
            "unit": "ms/image",
            "ratio": batched_ms / single_ms,  # below 1: batching requests server-side would pay
        },
    ]
    return records


def chart(records: list[dict], path: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, (latency, rate) = plt.subplots(1, 2, figsize=(10, 4))
    for percentile, color in (("p50", "#4a7ab5"), ("p99", "#b5654a")):
        values = [_value(records, f"serve.http.c{c}.{percentile}") for c in CONCURRENCY]
        latency.plot(CONCURRENCY, values, marker="o", color=color, label=f"HTTP {percentile}")
        latency.axhline(
            _value(records, f"serve.in_process.{percentile}"),
            color=color,
            ls=":",
            label=f"in-process {percentile}",
        )
    latency.set_xlabel("requests in flight")
    latency.set_ylabel("ms per one-image request")
    latency.set_xscale("log", base=2)
    latency.legend()
    rate.bar(
        [str(c) for c in CONCURRENCY],
        [_value(records, f"serve.http.c{c}.throughput") for c in CONCURRENCY],
        color="#4a7ab5",
    )
    rate.set_xlabel("requests in flight")
    rate.set_ylabel("requests/s")
    figure.suptitle("imgpipe serve on 127.0.0.1")
    figure.tight_layout()
    figure.savefig(path, dpi=100)
    plt.close(figure)


def _value(records: list[dict], name: str) -> float:
    return next(r["value"] for r in records if r["name"] == name)


def headline(records: list[dict]) -> list[tuple[str, str]]:
    by_name = {r["name"]: r for r in records}
    one, busiest = by_name["serve.http.c1.p50"], max(CONCURRENCY)
    throughput = by_name[f"serve.http.c{busiest}.throughput"]["value"]
    return [
        (
            "`imgpipe serve`, one-image requests over HTTP",
            f"p50 {one['value']:.1f} ms one at a time; {throughput:.0f} requests/s with "
            f"{busiest} in flight",
        )
    ]


def meaning(records: list[dict]) -> list[str]:
    by_name = {r["name"]: r for r in records}
    http, local = by_name["serve.http.c1.p50"], by_name["serve.in_process.p50"]
    batched = by_name[f"serve.batch{BATCH}_per_image"]
    return [
        f"One request at a time takes {http['value']:.1f} ms at p50 against "
        f"{local['value']:.1f} ms for the model called in process: the rest is HTTP and JSON.",
        f"A batch of {BATCH} costs {batched['ratio']:.2f}x a single image's time per image "
        f"(below 1, the server's batching of concurrent requests pays); `imgpipe predict` on "
        f"one file takes {by_name['serve.predict_one_file']['value']:.1f} s.",
    ]
