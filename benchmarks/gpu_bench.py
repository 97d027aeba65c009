"""`make bench-gpu`: ResNet-50 training throughput on a CUDA machine, in under 8 minutes.

Configurations, each in its own process (a policy, XLA cache and device set per process):
synthetic data (one batch held in memory: the model's speed alone) in float32, mixed_float16 and
mixed_float16 + XLA; real data (photo-like JPEGs ingested by the Beam job into shards, decoded and
augmented by the training input pipeline every step) in the best synthetic setting; then all GPUs
when there are several. Every configuration runs the trainer's own engine, model and optimizer:
a first graph call of `warmup` steps (tracing, XLA compilation), then `steps` measured steps.

Results go to OUTPUT/results.json (rewritten after every configuration, so a run cut short keeps
what finished) and OUTPUT/gpu.png. ResNet-50 starts from random weights; nothing is downloaded.
`--smoke` runs the same script at toy size on a CPU, which is how CI-less machines test it.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time

from benchmarks.charts import label_bars, value_and_ratio
from benchmarks.photo_data import write_photo_jpegs
from benchmarks.training_bench import measure_in_child

FULL = {
    "model": "resnet50",
    "image_size": 224,
    "batch_size": 256,
    "warmup": 10,
    "steps": 60,
    "per_execution": 10,
    "repeats": 1,
}
# The smoke run checks the script, not ResNet-50: XLA-compiling ResNet-50 on a CPU takes minutes.
SMOKE = {
    "model": "small_cnn",
    "image_size": 32,
    "batch_size": 2,
    "warmup": 1,
    "steps": 2,
    "per_execution": 1,
    "repeats": 1,
}
FULL_PHOTOS, SMOKE_PHOTOS = 3000, 24
BUDGET_SECONDS = 420  # the whole run, start-up and data included
CONFIG_TIMEOUT_SECONDS = 150  # one configuration; a stuck one cannot eat the whole budget
MIN_SECONDS_TO_START = 45  # a configuration started with less left would be cut short anyway


def configurations(gpus: int) -> list[dict]:
    """In priority order: what matters most runs first, in case the budget runs out."""
    runs = [
        {"data": "synthetic", "precision": "float32", "xla": False, "devices": 1},
        {"data": "synthetic", "precision": "mixed_float16", "xla": False, "devices": 1},
        {"data": "synthetic", "precision": "mixed_float16", "xla": True, "devices": 1},
        {"data": "real", "precision": "mixed_float16", "xla": True, "devices": 1},
    ]
    if gpus > 1:
        runs += [
            {"data": "synthetic", "precision": "mixed_float16", "xla": True, "devices": gpus},
            {"data": "real", "precision": "mixed_float16", "xla": True, "devices": gpus},
        ]
    return runs


def record_name(run: dict, size: dict) -> str:
    xla = "+xla" if run["xla"] else ""
    return f"gpu.{size['model']}.{run['data']}.{run['precision']}{xla}.{run['devices']}dev"


def probe() -> dict:
    """What TensorFlow sees here and was built against (run in a child: the parent never starts
    CUDA, so each configuration's process gets the GPUs to itself)."""
    import tensorflow as tf

    build = tf.sysconfig.get_build_info()
    return {
        "tensorflow": tf.__version__,
        "gpus": [d.name for d in tf.config.list_physical_devices("GPU")],
        "details": [
            {k: str(v) for k, v in tf.config.experimental.get_device_details(d).items()}
            for d in tf.config.list_physical_devices("GPU")
        ],
        "built_with": {k: str(build.get(k)) for k in ("cuda_version", "cudnn_version")},
    }


def nvidia_smi_gpus() -> int:
    try:
        listing = subprocess.run(
            ["nvidia-smi", "-L"], capture_output=True, text=True, timeout=30, check=True
        )
    except (OSError, subprocess.SubprocessError):
        return 0
    return sum(line.startswith("GPU ") for line in listing.stdout.splitlines())


def prepare_real_data(workdir: str, photos: int) -> str:
    """Photo-like JPEGs, ingested into gzip TFRecord shards by the Beam job; returns the train
    split's glob."""
    from data_prep.ingest import IngestOutputs, run_ingest
    from data_prep.ingest_config import IngestConfig

    images = write_photo_jpegs(os.path.join(workdir, f"photos_{photos}"), photos, seed=5)
    shards = os.path.join(workdir, f"shards_{photos}")
    if not os.path.exists(os.path.join(shards, "label_map.json")):
        run_ingest(IngestConfig(input=images), IngestOutputs.under(shards))
    return os.path.join(shards, "Split-train", "*")


def run(output: str, workdir: str, smoke: bool, budget_seconds: float) -> list[dict]:
    """Writes results into `output`; the photos and shards go to `workdir` (kept small output)."""
    deadline = time.monotonic() + budget_seconds
    size = SMOKE if smoke else FULL
    found = _probe_in_child()
    found["nvidia_smi_gpus"] = nvidia_smi_gpus()
    print(f"environment: {json.dumps(found)}", flush=True)
    gpus = len(found["gpus"])
    records: list[dict] = []
    _write(output, records, size, found)
    if not gpus and not smoke:
        raise SystemExit(
            f"TensorFlow sees no GPU (nvidia-smi lists {found['nvidia_smi_gpus']}): TensorFlow "
            f"{found['tensorflow']} needs CUDA {found['built_with']['cuda_version']} and cuDNN "
            f"{found['built_with']['cudnn_version']} libraries (pip extra tensorflow[and-cuda]) "
            "on this machine. Use --smoke to run on a CPU."
        )
    shards = None
    baseline = None
    for run_ in configurations(gpus):
        left = deadline - time.monotonic()
        if left < MIN_SECONDS_TO_START * (0.1 if smoke else 1):
            print(f"skipped {record_name(run_, size)}: {left:.0f} s of budget left", flush=True)
            continue
        if run_["data"] == "real" and shards is None:
            photos = SMOKE_PHOTOS if smoke else FULL_PHOTOS
            shards = prepare_real_data(workdir, photos)
            left = deadline - time.monotonic()
        name = record_name(run_, size)
        spec = {**size, **run_, "mode": "graph", "shards": shards}
        try:
            result = measure_in_child(spec, min(left, CONFIG_TIMEOUT_SECONDS))
        except (RuntimeError, subprocess.TimeoutExpired) as error:
            print(f"{name}: failed or timed out: {str(error)[-3000:]}", file=sys.stderr, flush=True)
            found.setdefault("failed", {})[name] = str(error)[-3000:]
            _write(output, records, size, found)
            continue
        record = {"name": name, "value": result["images_per_s"], "unit": "images/s", **result}
        if baseline is None:
            baseline = record
        else:
            record["baseline"] = baseline["name"]
            record["ratio"] = record["value"] / baseline["value"]
        records.append(record)
        records.append({"name": name + ".first_call", "value": result["first_call_s"], "unit": "s"})
        _write(output, records, size, found)
        print(f"{name}: {result['images_per_s']:.1f} images/s", flush=True)
    _write(output, records, size, found)
    chart(records, os.path.join(output, "gpu.png"))
    return records


def _probe_in_child() -> dict:
    command = [sys.executable, "-m", "benchmarks.gpu_bench", "--probe"]
    child = subprocess.run(command, capture_output=True, text=True, timeout=120, check=True)
    return json.loads(child.stdout.strip().splitlines()[-1])


def _write(output: str, records: list[dict], size: dict, environment: dict) -> None:
    with open(os.path.join(output, "results.json"), "w") as handle:
        json.dump(records, handle, indent=2)
    settings = {"size": size, "environment": environment}
    with open(os.path.join(output, "gpu_settings.json"), "w") as handle:
        json.dump(settings, handle, indent=2)


def chart(records: list[dict], path: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    speed = [r for r in records if r["unit"] == "images/s"]
    figure, axis = plt.subplots(figsize=(10, 4))
    names = [r["name"].split(".", 2)[-1].replace(".", "\n", 1) for r in speed]
    bars = axis.bar(names, [r["value"] for r in speed], color="#4a7ab5")

    label_bars(axis, bars, [value_and_ratio(record) for record in speed])
    model = speed[0]["name"].split(".")[1] if speed else ""
    axis.set_title(f"{model} training throughput (images/s), trainer engine")
    axis.tick_params(axis="x", labelsize=7)
    figure.tight_layout()
    figure.savefig(path, dpi=110)
    plt.close(figure)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--output", default="build/bench-gpu")
    parser.add_argument(
        "--workdir", default="/tmp/imgpipe-bench-gpu", help="generated photos and shards"
    )
    parser.add_argument("--smoke", action="store_true", help="toy size, runs on a CPU")
    parser.add_argument("--budget-seconds", type=float, default=BUDGET_SECONDS)
    parser.add_argument("--probe", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.probe:
        print(json.dumps(probe()))
        return
    os.makedirs(args.output, exist_ok=True)
    records = run(args.output, args.workdir, args.smoke, args.budget_seconds)
    for record in records:
        ratio = f"{record['ratio']:.2f}" if "ratio" in record else ""
        print(f"{record['name']:<58} {record['value']:>10.1f} {record['unit']:<9} {ratio:>6}")


if __name__ == "__main__":
    main()
