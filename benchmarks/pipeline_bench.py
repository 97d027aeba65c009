"""Part `pipeline`: what a run costs beyond its training, per component, and how it grows.

`imgpipe run` (a child process, fresh build folder, exactly 2 epochs: no step floor stretching
the smaller run's, no accuracy floor, every other setting the local preset's) on N and 4N
photo-like JPEGs. Each component's wall time comes from ML Metadata; the line through the two
sizes gives its fixed cost (the intercept, seconds) and its cost per image (the slope), shown
beside the decode floor: the same JPEGs decoded and resized to the model's input size in memory
on every core, the least any component that looks at the pixels can spend per image. Peak
memory is the whole process tree's (Beam workers, the serving check's process included).

Sizes come from the environment, so a quick run is possible while the machine is shared:
  BENCH_PIPELINE_IMAGES  N (default 2000); the second run has 4N
  BENCH_PIPELINE_EPOCHS  training epochs of each run (default 2)
  BENCH_PIPELINE_BEAM    Beam options of every run, e.g. "--direct_running_mode=multi_processing"
                         (default none: the pipeline chooses by input size)
"""

from __future__ import annotations

import os
import pathlib
import shlex
import shutil
import sys
import time

from benchmarks.charts import label_bars
from benchmarks.photo_data import write_photo_jpegs
from benchmarks.process_tree import run_measured
from benchmarks.report import Section, default_section

IMAGES = int(os.environ.get("BENCH_PIPELINE_IMAGES", "2000"))
EPOCHS = int(os.environ.get("BENCH_PIPELINE_EPOCHS", "2"))
BEAM_ARGS = shlex.split(os.environ.get("BENCH_PIPELINE_BEAM", ""))
TRAINER = "Trainer"
PREFIX = "pipeline"
# One run per size gives both times and memory, so memory is sampled seldom: each sample costs
# a core's time (benchmarks/process_tree.py), and the pipeline's peaks (the Trainer, the
# Evaluator) last seconds.
MEMORY_SAMPLE_S = 1.0


def short_run_settings() -> list[str]:
    """Exactly EPOCHS epochs, no step floor stretching the smaller run's, no accuracy floor."""
    from components.trainer.trainer_config import TrainerConfig

    warmup = min(TrainerConfig().warmup_epochs, EPOCHS - 1)  # the config needs warmup < epochs
    return [
        f"trainer.epochs={EPOCHS}",
        f"trainer.warmup_epochs={warmup}",
        "trainer.min_phase_steps=0",  # N=2,000 is 24 steps an epoch
        "min_accuracy=0",
    ]


def run_pipeline(data_dir: str, build_dir: str, settings: list[str] | None = None) -> dict:
    """One fresh `imgpipe run` with `settings` (default short_run_settings()): wall seconds,
    peak memory, each component's seconds, the eval accuracy and the training report."""
    from pipeline.lineage import list_runs
    from pipeline.pipeline_config import local_preset
    from pipeline.runners.local import open_store

    shutil.rmtree(build_dir, ignore_errors=True)
    imgpipe = os.path.join(os.path.dirname(sys.executable), "imgpipe")
    command = [imgpipe, "run", "--data", data_dir, "--build-dir", build_dir]
    for setting in short_run_settings() if settings is None else settings:
        command += ["--set", setting]
    if BEAM_ARGS:
        command += ["--", *BEAM_ARGS]
    finished = run_measured(command, sample_every_s=MEMORY_SAMPLE_S)
    if finished.returncode != 0:
        raise RuntimeError(f"imgpipe run on {data_dir} exited {finished.returncode}")
    config = local_preset(data_dir, build_dir)
    [run] = list_runs(open_store(config.metadata_path), config.name, limit=1)
    return {
        "wall_s": finished.seconds,
        # PSS: ImageExampleGen's forked children share most of the pipeline process's pages,
        # which the RSS sum would count once per child.
        "peak_pss_bytes": finished.peak_pss_bytes,
        "components": {c.node: c.seconds for c in run.components if c.state == "ran"},
        # What the user waits for outside every component: before the first one starts (the
        # imports of TensorFlow, Beam and TFX, the input's snapshot, the pipeline's compile) and
        # after the last one ends (the summary, the run report).
        "outside_components_s": finished.seconds - run.seconds,
        "eval_accuracy": run.eval_accuracy,
        "training": run.training_performance or {},
    }


def decode_floor_ms(data_dir: str, image_size: int) -> float:
    """Milliseconds per image to decode and resize the JPEGs (bytes already in memory) with
    every core busy: the best of three passes."""
    import tensorflow as tf

    from components.trainer.preprocessing import decode_and_resize

    paths = sorted(
        os.path.join(folder, name)
        for folder, _, names in os.walk(data_dir)
        for name in names
        if name.endswith(".jpg")
    )
    encoded = [pathlib.Path(path).read_bytes() for path in paths]
    dataset = tf.data.Dataset.from_tensor_slices(encoded).map(
        lambda one: decode_and_resize(one, image_size), tf.data.AUTOTUNE
    )
    best = float("inf")
    for _ in range(3):
        started = time.perf_counter()
        for _ in dataset.batch(64).prefetch(tf.data.AUTOTUNE):
            pass
        best = min(best, time.perf_counter() - started)
    return 1000 * best / len(encoded)


def run(workdir: str) -> list[dict]:
    from components.trainer.trainer_config import TrainerConfig

    small, large = IMAGES, 4 * IMAGES
    results = {}
    for count, seed in ((small, 11), (large, 12)):
        data = write_photo_jpegs(f"{workdir}/data/photos_{count}", count, seed=seed)
        results[count] = run_pipeline(data, f"{workdir}/out/pipeline_{count}")
    floor = decode_floor_ms(f"{workdir}/data/photos_{small}", TrainerConfig().image_size)
    floor_name = f"{PREFIX}.decode_floor.ms_per_image"
    records = [{"name": floor_name, "value": floor, "unit": "ms/image"}]
    names = [n for n in results[small]["components"] if n in results[large]["components"]]
    for name in names:
        at_small, at_large = (results[n]["components"][name] for n in (small, large))
        slope_ms = 1000 * (at_large - at_small) / (large - small)
        records += [
            *(
                {
                    "name": f"{PREFIX}.{count}.{name}.seconds",
                    "value": seconds,
                    "unit": "s",
                    "component": name,
                    "images": count,
                }
                for count, seconds in ((small, at_small), (large, at_large))
            ),
            {
                "name": f"{PREFIX}.{name}.fixed_seconds",
                "value": at_small - slope_ms * small / 1000,
                "unit": "s",
            },
            {
                "name": f"{PREFIX}.{name}.ms_per_image",
                "value": slope_ms,
                "unit": "ms/image",
                "baseline": floor_name,
                "ratio": slope_ms / floor,
                "component": name,
            },
        ]
    fixed = [
        r
        for r in records
        if r["name"].endswith(".fixed_seconds") and r["name"] != f"{PREFIX}.{TRAINER}.fixed_seconds"
    ]
    records.append(
        {
            "name": f"{PREFIX}.non_training.fixed_seconds",
            "value": sum(r["value"] for r in fixed),
            "unit": "s",
        }
    )
    for count in (small, large):
        seconds = results[count]["components"]
        trainer = seconds[TRAINER]
        others = sum(value for node, value in seconds.items() if node != TRAINER)
        records += [
            {
                "name": f"{PREFIX}.{count}.wall_seconds",
                "value": results[count]["wall_s"],
                "unit": "s",
            },
            {
                "name": f"{PREFIX}.{count}.outside_components_seconds",
                "value": results[count]["outside_components_s"],
                "unit": "s",
            },
            {
                "name": f"{PREFIX}.{count}.non_training_seconds",
                "value": others,
                "unit": "s",
                "baseline": f"{PREFIX}.{count}.{TRAINER}.seconds",
                "ratio": others / trainer,
            },
            {
                "name": f"{PREFIX}.{count}.peak_pss",
                "value": results[count]["peak_pss_bytes"] / 2**20,
                "unit": "MiB",
            },
        ]
    records[-1].update(
        baseline=f"{PREFIX}.{small}.peak_pss",
        ratio=results[large]["peak_pss_bytes"] / results[small]["peak_pss_bytes"],
    )
    return records


def chart(records: list[dict], path: str) -> None:
    """Left: each component's seconds at N and 4N. Right: its cost per image beside the decode
    floor."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    timed = [r for r in records if "images" in r]
    sizes = sorted({r["images"] for r in timed})
    components = list(dict.fromkeys(r["component"] for r in timed))
    per_image = [r for r in records if r["unit"] == "ms/image"]
    figure, (left, right) = plt.subplots(1, 2, figsize=(14, 5))
    positions = np.arange(len(components))
    width = 0.8 / max(len(sizes), 1)
    for index, size in enumerate(sizes):
        seconds = {r["component"]: r["value"] for r in timed if r["images"] == size}
        values = [seconds[name] for name in components]
        bars = left.bar(positions + index * width, values, width, label=f"{size} images")
        label_bars(left, bars, [f"{value:.0f}" for value in values])
    left.set_xticks(positions + width * (len(sizes) - 1) / 2, components, rotation=35, ha="right")
    left.set_ylabel("seconds")
    left.set_title("wall time per component")
    left.legend()
    names = [r.get("component", "decode floor") for r in per_image]
    bars = right.bar(names, [r["value"] for r in per_image], color="#4a7ab5")
    label_bars(
        right,
        bars,
        [f"{r['value']:.2f}" + (f"\n{r['ratio']:.1f}x" if "ratio" in r else "") for r in per_image],
    )
    right.set_ylabel("ms per image (slope between the two sizes)")
    right.set_title("marginal cost per image vs the decode floor")
    right.set_xticks(range(len(names)), names, rotation=35, ha="right")
    figure.suptitle("imgpipe run: fixed cost and cost per image of each component")
    figure.tight_layout()
    figure.savefig(path, dpi=110)
    plt.close(figure)


def section(records: list[dict]) -> Section:
    """The table, and per input size how the other components' time compares with training."""
    notes = [
        f"On {int(record['name'].split('.')[1]):,} images the components other than the "
        f"Trainer take {record['ratio']:.2f}x the Trainer's time."
        for record in records
        if record["name"].endswith(".non_training_seconds") and "ratio" in record
    ]
    return default_section(__doc__, records, notes=notes)
