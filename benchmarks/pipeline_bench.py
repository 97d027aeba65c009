"""Part `pipeline`: what a run costs beyond its training, per component, and how it grows.

`imgpipe run` (a child process, fresh build folder, exactly 2 epochs: no step floor stretching
the smaller runs', no accuracy floor, every other setting the local preset's) on photo-like
JPEGs at each size. Each component's wall time comes from ML Metadata; the least-squares line
through the sizes gives its fixed cost (the intercept, seconds) and its cost per image (the
slope), shown beside the decode floor: the same JPEGs decoded and resized to the model's input
size in memory on every core, the least any component that looks at the pixels can spend per
image. With three sizes or more, the cost per image between each pair of neighbouring sizes
shows whether a component grows linearly. Peak memory is the whole process tree's (Beam
workers, the serving check's process included), sampled each second; what a component adds is
the largest sample while it ran less the last one before it started.

Sizes come from the environment, so a quick run is possible while the machine is shared:
  BENCH_PIPELINE_IMAGES  the image counts (default "2000 8000 32000"; at least two)
  BENCH_PIPELINE_EPOCHS  training epochs of each run (default 2)
  BENCH_PIPELINE_BEAM    Beam options of every run, e.g. "--direct_running_mode=multi_processing"
                         (default none: the pipeline chooses by input size)
"""

from __future__ import annotations

import itertools
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

TITLE = "What a run costs beyond its training"
IMAGES = sorted(int(n) for n in os.environ.get("BENCH_PIPELINE_IMAGES", "2000 8000 32000").split())
EPOCHS = int(os.environ.get("BENCH_PIPELINE_EPOCHS", "2"))
BEAM_ARGS = shlex.split(os.environ.get("BENCH_PIPELINE_BEAM", ""))
TRAINER = "Trainer"
PREFIX = "pipeline"
# A component whose cost per image between the two largest sizes exceeds that between the two
# smallest by more than this factor is said to grow faster than linearly; one that costs less
# than MATERIAL_MS_PER_IMAGE between the largest is not judged (its slope is timing noise).
SUPERLINEAR_FACTOR = 1.5
MATERIAL_MS_PER_IMAGE = 0.1
# One run per size gives both times and memory, so memory is sampled seldom: each sample costs
# a core's time (benchmarks/process_tree.py), and the pipeline's peaks (the Trainer, the
# Evaluator) last seconds.
MEMORY_SAMPLE_S = 1.0


def short_run_settings() -> list[str]:
    """Exactly EPOCHS epochs, no step floor stretching the smaller run's, no accuracy floor."""
    from components.training.trainer_config import TrainerConfig

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
    from pipeline.config.pipeline_config import local_preset
    from pipeline.lineage import list_runs
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
    store = open_store(config.metadata_path)
    [run] = list_runs(store, config.name, limit=1)
    ran = [c for c in run.components if c.state == "ran"]
    executions = {e.id: e for e in store.get_executions_by_id([c.execution_id for c in ran])}
    intervals = {
        c.node: (
            executions[c.execution_id].create_time_since_epoch / 1000,
            executions[c.execution_id].last_update_time_since_epoch / 1000,
        )
        for c in ran
    }
    return {
        "wall_s": finished.seconds,
        # PSS: ImageExampleGen's forked children share most of the pipeline process's pages,
        # which the RSS sum would count once per child.
        "peak_pss_bytes": finished.peak_pss_bytes,
        "components_added_pss_bytes": memory_added(finished.pss_samples, intervals),
        "components": {c.node: c.seconds for c in ran},
        # What the user waits for outside every component: before the first one starts (the
        # imports of TensorFlow, Beam and TFX, the input's snapshot, the pipeline's compile) and
        # after the last one ends (the summary, the run report).
        "outside_components_s": finished.seconds - run.seconds,
        "eval_accuracy": run.eval_accuracy,
        "training": run.training_performance or {},
    }


def memory_added(
    samples: tuple[tuple[float, int], ...], intervals: dict[str, tuple[float, float]]
) -> dict[str, int]:
    """What each component added to the tree's memory: its largest sample while it ran (between
    its start and end, seconds since the epoch) less the lowest from the last sample before it
    started up to that peak (a previous component's process may still have been alive in the
    sample before). Components run one at a time, mostly in the run's own process, which seldom
    gives memory back, so the tree's peak while a component runs reflects the ones before it;
    the addition is the component's own. A component shorter than the sampling interval, or one
    that starts before the first sample, has none."""
    added = {}
    for name, (start, end) in intervals.items():
        before = [pss for at, pss in samples if at < start]
        inside = [pss for at, pss in samples if start <= at <= end]
        if before and inside:
            peak = max(range(len(inside)), key=inside.__getitem__)
            added[name] = inside[peak] - min(before[-1], *inside[: peak + 1])
    return added


def decode_floor_ms(data_dir: str, image_size: int) -> float:
    """Milliseconds per image to decode and resize the JPEGs (bytes already in memory) with
    every core busy: the best of three passes."""
    import tensorflow as tf

    from components.training.preprocessing import decode_and_resize

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


def fit_line(sizes: list[int], seconds: list[float]) -> tuple[float, float]:
    """The least-squares line through (size, seconds): its intercept (seconds) and slope
    (milliseconds per image)."""
    import numpy as np

    slope, intercept = np.polyfit(np.array(sizes, dtype=float), np.array(seconds), 1)
    return float(intercept), 1000 * float(slope)


def run(workdir: str) -> list[dict]:
    from components.training.trainer_config import TrainerConfig

    if len(IMAGES) < 2:
        raise SystemExit("BENCH_PIPELINE_IMAGES: at least two sizes, e.g. '2000 8000'")
    results = {}
    for index, count in enumerate(IMAGES):
        data = write_photo_jpegs(f"{workdir}/data/photos_{count}", count, seed=11 + index)
        results[count] = run_pipeline(data, f"{workdir}/out/pipeline_{count}")
    smallest = IMAGES[0]
    floor = decode_floor_ms(f"{workdir}/data/photos_{smallest}", TrainerConfig().image_size)
    floor_name = f"{PREFIX}.decode_floor.ms_per_image"
    records = [{"name": floor_name, "value": floor, "unit": "ms/image"}]
    names = [
        n
        for n in results[smallest]["components"]
        if all(n in r["components"] for r in results.values())
    ]
    for name in names:
        seconds = [results[count]["components"][name] for count in IMAGES]
        records += [
            {
                "name": f"{PREFIX}.{count}.{name}.seconds",
                "value": value,
                "unit": "s",
                "component": name,
                "images": count,
            }
            for count, value in zip(IMAGES, seconds, strict=True)
        ]
        fixed, slope_ms = fit_line(IMAGES, seconds)
        records += [
            {"name": f"{PREFIX}.{name}.fixed_seconds", "value": fixed, "unit": "s"},
            {
                "name": f"{PREFIX}.{name}.ms_per_image",
                "value": slope_ms,
                "unit": "ms/image",
                "baseline": floor_name,
                "ratio": slope_ms / floor,
                "component": name,
            },
        ]
        if len(IMAGES) > 2:
            records += [
                {
                    "name": f"{PREFIX}.{name}.ms_per_image_{low}_to_{high}",
                    "value": 1000 * (at_high - at_low) / (high - low),
                    "unit": "ms/image",
                    "interval_of": name,
                    "interval": [low, high],
                }
                for (low, at_low), (high, at_high) in itertools.pairwise(
                    zip(IMAGES, seconds, strict=True)
                )
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
    for count in IMAGES:
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
        ]
        peak = {
            "name": f"{PREFIX}.{count}.peak_pss",
            "value": results[count]["peak_pss_bytes"] / 2**20,
            "unit": "MiB",
            "memory_at": count,
        }
        if count != smallest:
            peak.update(
                baseline=f"{PREFIX}.{smallest}.peak_pss",
                ratio=results[count]["peak_pss_bytes"] / results[smallest]["peak_pss_bytes"],
            )
        records.append(peak)
    from data_prep.runtime import running_mode
    from data_prep.runtime.cores import usable_cores

    for count in IMAGES:
        # As the pipeline decides it (pipeline/config/beam_options.py): the memory its Beam
        # components add depends on it.
        resolved = running_mode.with_running_mode(
            tuple(BEAM_ARGS), count, running_mode.IN_PROCESS_MAX_FILES
        )
        records.append(
            {
                "name": f"{PREFIX}.{count}.beam_worker_processes",
                "value": usable_cores() if running_mode.ONE_WORKER_PER_CORE[0] in resolved else 0,
                "unit": "processes",
                "workers_at": count,
            }
        )
    sampled = [
        name
        for name in results[smallest]["components_added_pss_bytes"]
        if all(name in r["components_added_pss_bytes"] for r in results.values())
    ]
    records += [
        {
            "name": f"{PREFIX}.{count}.{name}.added_pss",
            "value": results[count]["components_added_pss_bytes"][name] / 2**20,
            "unit": "MiB",
            "added_by": name,
            "added_at": count,
        }
        for name in sampled
        for count in IMAGES
    ]
    return records


def chart(records: list[dict], path: str) -> None:
    """Left: each component's seconds at each size. Right: its cost per image beside the decode
    floor."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    timed = [r for r in records if "images" in r]
    sizes = sorted({r["images"] for r in timed})
    components = list(dict.fromkeys(r["component"] for r in timed))
    per_image = [r for r in records if r["unit"] == "ms/image" and "interval_of" not in r]
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
    right.set_ylabel("ms per image (least-squares slope over the sizes)")
    right.set_title("marginal cost per image vs the decode floor")
    right.set_xticks(range(len(names)), names, rotation=35, ha="right")
    figure.suptitle("imgpipe run: fixed cost and cost per image of each component")
    figure.tight_layout()
    figure.savefig(path, dpi=110)
    plt.close(figure)


def section(records: list[dict]) -> Section:
    """The table; per input size how the other components' time compares with training; which
    components grow faster than linearly; and how peak memory grows with the input."""
    notes = [
        f"On {int(record['name'].split('.')[1]):,} images the components other than the "
        f"Trainer take {record['ratio']:.2f}x the Trainer's time."
        for record in records
        if record["name"].endswith(".non_training_seconds") and "ratio" in record
    ]
    intervals: dict[str, list[dict]] = {}
    for record in records:
        if "interval_of" in record:
            intervals.setdefault(record["interval_of"], []).append(record)
    growing = [
        (name, found[0], found[-1])
        for name, found in intervals.items()
        if found[-1]["value"] >= MATERIAL_MS_PER_IMAGE
        and found[-1]["value"] > SUPERLINEAR_FACTOR * max(found[0]["value"], 0.0)
    ]
    notes += [
        f"{name} grows faster than linearly: {first['value']:.3g} ms per image between "
        f"{first['interval'][0]:,} and {first['interval'][1]:,} images, "
        f"{last['value']:.3g} between {last['interval'][0]:,} and {last['interval'][1]:,}."
        for name, first, last in growing
    ]
    if intervals and not growing:
        notes.append(
            "Every component's cost per image stays within "
            f"{SUPERLINEAR_FACTOR}x from the smallest sizes to the largest (those costing "
            f"{MATERIAL_MS_PER_IMAGE} ms per image or more)."
        )
    memory = [r for r in records if "memory_at" in r]
    if len(memory) > 1:
        notes.append(
            "Peak memory of the whole process tree: "
            + ", ".join(f"{r['value']:,.0f} MiB at {r['memory_at']:,} images" for r in memory)
            + f" ({memory[-1]['ratio']:.2f}x for "
            f"{memory[-1]['memory_at'] / memory[0]['memory_at']:.0f}x the images)."
        )
    notes += _component_memory_notes([r for r in records if "added_by" in r])
    notes += _running_mode_notes([r for r in records if "workers_at" in r])
    return default_section(__doc__, records, notes=notes)


def _component_memory_notes(added: list[dict]) -> list[str]:
    """Which component adds the most memory at the largest size, and whose addition grows
    most from the smallest size to the largest."""
    if not added:
        return []
    sizes = sorted({r["added_at"] for r in added})
    small, large = sizes[0], sizes[-1]
    at = {(r["added_by"], r["added_at"]): r["value"] for r in added}
    names = list(dict.fromkeys(r["added_by"] for r in added))
    most = max(names, key=lambda name: at[name, large])
    notes = [f"At {large:,} images {most} adds the most memory: {at[most, large]:,.0f} MiB."]
    if small != large:
        grower = max(names, key=lambda name: at[name, large] - at[name, small])
        notes.append(
            f"What {grower} adds grows most: {at[grower, small]:,.0f} MiB at {small:,} images, "
            f"{at[grower, large]:,.0f} MiB at {large:,}."
        )
    return notes


def _running_mode_notes(workers: list[dict]) -> list[str]:
    """Where the Beam components left the run's process for worker processes of their own."""
    in_process = [r["workers_at"] for r in workers if not r["value"]]
    apart = [r for r in workers if r["value"]]
    if not (in_process and apart):
        return []
    return [
        "The Beam components ran in the run's own process at "
        + _sizes(in_process)
        + f" images and in {apart[0]['value']:.0f} worker processes at "
        + _sizes([r["workers_at"] for r in apart])
        + ": the memory StatisticsGen, Transform and Evaluator add there includes those "
        "processes, each of which imports TensorFlow."
    ]


def _sizes(sizes: list[int]) -> str:
    named = [f"{size:,}" for size in sizes]
    return named[0] if len(named) == 1 else ", ".join(named[:-1]) + " and " + named[-1]


def headline(records: list[dict]) -> list[tuple[str, str]]:
    """At the largest size: the other components' time against the Trainer's."""
    overheads = [r for r in records if r["name"].endswith(".non_training_seconds") and "ratio" in r]
    if not overheads:
        return []
    largest = max(overheads, key=lambda r: int(r["name"].split(".")[1]))
    return [
        (
            f"Components other than the Trainer ({int(largest['name'].split('.')[1]):,} images)",
            f"{largest['ratio']:.2f}x the Trainer's time ({largest['value']:.0f} s)",
        )
    ]


def meaning(records: list[dict]) -> list[str]:
    """The overhead at the largest size, the first component that grows faster than linearly,
    and how peak memory grows."""
    notes = section(records).notes
    overhead = [note for note in notes if note.startswith("On ")][-1:]
    growing = [note for note in notes if "faster than linearly" in note][:1]
    memory = [note for note in notes if note.startswith("Peak memory")]
    return overhead + growing + memory
