"""Serving figures of the exported model: load time, the first (cold) request against warm
single-image latency (why exports carry warmup requests), and TFLite float32/float16/int8 latency.

The model is the default trainer config's architecture (small_cnn, 64x64, 6 classes) with its
initial weights: latency and load time depend on the graph and the weight count, not on the
weights' values (the int8 model is calibrated on random pixels). Accuracy of the TFLite models
is measured by the pipeline's TFLiteExport on the trained model, not here. SavedModel figures
come from the serving check's probe, each in a fresh process as a model server starts (encoded
JPEG bytes in: decoding and resizing included); TFLite figures are the interpreter's invoke on
decoded, resized pixels (what the TFLite models take), one thread.

Sizes come from the environment so a quick run is possible; `make bench` uses the defaults:
  BENCH_SERVING_RUNS      fresh processes for the SavedModel figures (default 3)
  BENCH_SERVING_REQUESTS  timed single-image requests per measurement (default 300)
"""

from __future__ import annotations

import multiprocessing
import os

import numpy as np

TITLE = "Serving latency: the SavedModel and TFLite"
RUNS = int(os.environ.get("BENCH_SERVING_RUNS", "3"))  # the median is reported
LATENCY_REQUESTS = int(os.environ.get("BENCH_SERVING_REQUESTS", "300"))
CLASSES = 6
CALIBRATION_IMAGES = 50


def _normalization():
    from components.training.preprocessing import Normalization

    return Normalization((120.0, 115.0, 100.0), (60.0, 55.0, 50.0))


def export_saved_model(directory: str):
    """The default trainer config's model, untrained, exported to directory: (its image size,
    the Keras model)."""
    from components.training import export
    from components.training.model import build_model
    from components.training.trainer_config import TrainerConfig

    config = TrainerConfig()
    model = build_model(config, CLASSES)
    labels = [f"class_{i}" for i in range(CLASSES)]
    export.export_model(model, directory, config.image_size, labels, _normalization())
    return config.image_size, model


def _export(directory: str):
    from components.serving.tflite_export import FILES, convert, pixels_function

    image_size, model = export_saved_model(directory)
    function = pixels_function(model, image_size, _normalization())
    shape = (CALIBRATION_IMAGES, image_size, image_size, 3)
    representative = np.random.default_rng(0).uniform(0, 255, shape).astype(np.float32)
    return image_size, {name: convert(function, model, name, representative) for name in FILES}


def probe_in_fresh_process(model_dir: str) -> dict:
    """The serving check's probe in a new Python process: a server's cold load, not one whose
    TensorFlow already ran this model."""
    from components.serving.serving_probe import probe

    with multiprocessing.get_context("spawn").Pool(1) as pool:
        return pool.apply(probe, (model_dir, LATENCY_REQUESTS))


def run(workdir: str) -> list[dict]:
    model_dir = os.path.join(workdir, "serving_bench", "model")
    image_size, flatbuffers = _export(model_dir)
    probes = [probe_in_fresh_process(model_dir) for _ in range(RUNS)]
    for probe in probes:
        if probe["problems"]:
            raise RuntimeError(f"serving probe failed: {probe['problems']}")

    def median(values) -> float:
        return float(np.median(values))

    load = median([p["load_seconds"] for p in probes])
    cold = median([p["warmup_request_ms"][0] for p in probes])
    p50 = median([p["latency_ms"]["p50"] for p in probes])
    p99 = median([p["latency_ms"]["p99"] for p in probes])
    records = [
        {"name": "serving.saved_model.load", "value": load, "unit": "s"},
        {
            "name": "serving.saved_model.first_request",
            "value": cold,
            "unit": "ms",
            "ratio": cold / p50,  # what a server without warmup makes its first client wait
        },
        {"name": "serving.saved_model.p50", "value": p50, "unit": "ms"},
        {"name": "serving.saved_model.p99", "value": p99, "unit": "ms"},
    ]
    from components.serving.tflite_export import single_image_latency

    for name, flatbuffer in flatbuffers.items():
        tflite = single_image_latency(flatbuffer, image_size, LATENCY_REQUESTS)
        records += [
            {"name": f"serving.tflite_{name}.p50", "value": tflite["p50"], "unit": "ms"},
            {"name": f"serving.tflite_{name}.p99", "value": tflite["p99"], "unit": "ms"},
            {
                "name": f"serving.tflite_{name}.size",
                "value": len(flatbuffer) / 2**20,
                "unit": "MiB",
            },
        ]
    return records


def chart(records: list[dict], path: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    latency = [r for r in records if r["unit"] == "ms"]
    figure, axis = plt.subplots(figsize=(9, 4))
    names = [r["name"].removeprefix("serving.").replace(".", "\n") for r in latency]
    bars = axis.bar(names, [r["value"] for r in latency], color="#4a7ab5")
    for bar, record in zip(bars, latency, strict=True):
        axis.annotate(
            f"{record['value']:.2f}",
            (bar.get_x() + bar.get_width() / 2, bar.get_height()),
            ha="center",
            va="bottom",
        )
    axis.set_yscale("log")
    axis.set_ylabel("ms (log scale)")
    axis.set_title("single-image latency: SavedModel (bytes in) and TFLite (pixels in)")
    figure.tight_layout()
    figure.savefig(path, dpi=100)
    plt.close(figure)


def headline(records: list[dict]) -> list[tuple[str, str]]:
    by_name = {r["name"]: r for r in records}
    p50, p99 = by_name["serving.saved_model.p50"], by_name["serving.saved_model.p99"]
    return [
        (
            "One image through the exported SavedModel, in process",
            f"p50 {p50['value']:.2f} ms, p99 {p99['value']:.2f} ms",
        )
    ]


def meaning(records: list[dict]) -> list[str]:
    by_name = {r["name"]: r for r in records}
    cold = by_name["serving.saved_model.first_request"]
    tflite = [r for r in records if r["name"].startswith("serving.tflite_") and "p50" in r["name"]]
    return [
        f"The model loads in {by_name['serving.saved_model.load']['value']:.1f} s; its first "
        f"request takes {cold['ratio']:.0f}x a warm one, which the export's warmup requests "
        "pay before a server answers.",
        "TFLite p50: "
        + ", ".join(
            f"{r['name'].split('.')[1].removeprefix('tflite_')} {r['value']:.2f} ms" for r in tflite
        )
        + ".",
    ]
