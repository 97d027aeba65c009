"""Part `peer`: imgpipe against the script a user would write instead, on the same images.

The same architecture (the default small_cnn at 64x64, batch 64, the Trainer's default epochs)
trained four ways, each from a fresh process, on the embedded dataset at its own size (what
`make run-local` trains on) and on photo-like JPEGs at each size asked for:
  (a) benchmarks/peer_keras_script.py: image_dataset_from_directory, cache(), prefetch(),
      Adam at Keras' default learning rate, model.fit, float32;
  (b) the same script under mixed_bfloat16, only where the CPU computes bfloat16 natively
      (elsewhere TensorFlow emulates it, many times slower: skipped, and the page says so);
  (c) imgpipe's Trainer (the Trainer component's seconds in (d), from ML Metadata);
  (d) the whole `imgpipe run`: ingest, statistics, schema, validation, Transform, training,
      evaluation, serving check, TFLite, push; every setting the local preset's, no accuracy
      floor.
For each: wall seconds, training images/s, eval accuracy and the seconds until the eval accuracy
first reached TARGET, each the median of ROUNDS rounds; a round runs every contender once, so a
ratio to the script is taken within a round (paired) and its median and range over the rounds
are given. The script validates after every epoch, so its time to TARGET is exact;
imgpipe evaluates once, after training, so its time to TARGET is the whole run's when the final
accuracy reaches it. The script's eval images are its own 20% validation split, imgpipe's its
hash-based eval split: the same share of the same images, not the same files.
Also: the Trainer's training step at LIMIT_SIZE px with MobileNetV3Small fed by its input
pipeline from photo shards against the same step fed a synthetic batch in memory (its data-free
limit).

Sizes come from the environment:
  BENCH_PEER_IMAGES    image counts of the photo-like JPEGs (default "2000 8000")
  BENCH_PEER_DATASETS  "embedded photos" (default): the embedded shapes, photo-like JPEGs
  BENCH_PEER_TARGET    the accuracy of "time to accuracy" (default 0.9)
  BENCH_PEER_EPOCHS    epochs of every contender (default: the Trainer's default)
  BENCH_PEER_ROUNDS    rounds of every contender at every size (default 3)
  BENCH_PEER_LIMIT_SIZE  image side of the MobileNetV3Small step (default 224)
"""

from __future__ import annotations

import json
import os
import statistics
import sys

from benchmarks.charts import label_bars
from benchmarks.photo_data import write_photo_jpegs
from benchmarks.pipeline_bench import run_pipeline
from benchmarks.process_tree import run_measured
from benchmarks.report import Section, default_section

TITLE = "The whole run against the plain Keras script"
IMAGES = [int(n) for n in os.environ.get("BENCH_PEER_IMAGES", "2000 8000").split()]
DATASETS = os.environ.get("BENCH_PEER_DATASETS", "embedded photos").split()
TARGET = float(os.environ.get("BENCH_PEER_TARGET", "0.9"))
EPOCHS = os.environ.get("BENCH_PEER_EPOCHS")
ROUNDS = int(os.environ.get("BENCH_PEER_ROUNDS", "3"))
PREFIX = "peer"
LIMIT_SIZE = int(os.environ.get("BENCH_PEER_LIMIT_SIZE", "224"))
LIMIT_SPEC = {
    "model": "mobilenet_v3_small",
    "image_size": LIMIT_SIZE,
    "batch_size": 16,
    "mode": "graph",
}
LIMIT_STEPS = {"warmup": 2, "steps": 8, "repeats": 1}


def _epochs() -> int:
    from components.training.trainer_config import TrainerConfig

    return int(EPOCHS) if EPOCHS else TrainerConfig().epochs


def sizes(dataset: str) -> list[int]:
    """The image counts `dataset` is trained at."""
    from data_prep.default_dataset import CLASS_NAMES, IMAGES_PER_CLASS

    return [len(CLASS_NAMES) * IMAGES_PER_CLASS] if dataset == "embedded" else IMAGES


def dataset_dir(workdir: str, dataset: str, count: int) -> str:
    """`count` images of `dataset` in class folders, made once and reused."""
    from data_prep.default_dataset import CLASS_NAMES, generate_default_dataset

    if dataset == "embedded":
        folder = os.path.join(workdir, "data", f"embedded_{count}")
        generate_default_dataset(folder, images_per_class=count // len(CLASS_NAMES))
        return folder
    if dataset == "photos":
        return write_photo_jpegs(os.path.join(workdir, "data", f"photos_{count}"), count, seed=11)
    raise SystemExit(f"BENCH_PEER_DATASETS: unknown dataset {dataset!r}; embedded or photos")


def run_script(data_dir: str, precision: str) -> dict:
    """The user's script in a fresh process: its JSON line, and the process's wall seconds."""
    command = [sys.executable, "-m", "benchmarks.peer_keras_script", data_dir]
    command += ["--epochs", str(_epochs()), "--precision", precision]
    finished = run_measured(command)
    if finished.returncode != 0:
        raise RuntimeError(f"{' '.join(command)} exited {finished.returncode}")
    result = json.loads(finished.stdout.strip().splitlines()[-1])
    before_fit = finished.seconds - result["fit_s"]
    reached = [point["seconds"] for point in result["curve"] if point["accuracy"] >= TARGET]
    return {
        **result,
        "wall_s": finished.seconds,
        "to_target_s": before_fit + reached[0] if reached else None,
    }


def _contenders(workdir: str, dataset: str, count: int) -> dict[str, dict]:
    from components.training.runtime import cpu_has_native_bfloat16
    from components.training.trainer_config import TrainerConfig

    data = dataset_dir(workdir, dataset, count)
    found = {"script_fp32": run_script(data, "float32")}
    if cpu_has_native_bfloat16():
        found["script_bf16"] = run_script(data, "mixed_bfloat16")
    warmup = min(TrainerConfig().warmup_epochs, _epochs() - 1)  # the config needs warmup < epochs
    settings = [f"trainer.epochs={_epochs()}", f"trainer.warmup_epochs={warmup}"]
    settings += ["trainer.min_phase_steps=0", "min_accuracy=0"]  # the same epochs as the script
    run = run_pipeline(data, os.path.join(workdir, "out", f"peer_{dataset}_{count}"), settings)
    training = run["training"]
    reached = run["eval_accuracy"] is not None and run["eval_accuracy"] >= TARGET
    found["trainer"] = {
        "wall_s": run["components"]["Trainer"],
        "images_per_s": training.get("images_per_second"),
        "eval_accuracy": run["eval_accuracy"],
        "to_target_s": run["components"]["Trainer"] if reached else None,
    }
    found["imgpipe_run"] = {
        "wall_s": run["wall_s"],
        "images_per_s": training.get("images_per_second"),
        "eval_accuracy": run["eval_accuracy"],
        "to_target_s": run["wall_s"] if reached else None,
        "peak_pss_mib": run["peak_pss_bytes"] / 2**20,
    }
    return found


FIGURES = ("wall_s", "fit_s", "images_per_s", "eval_accuracy", "to_target_s", "peak_pss_mib")


def goal_met(
    run_wall: float, run_accuracy: float, script_fit: float, script_accuracy: float
) -> bool:
    """The goal: the whole run within the script's training alone, at equal or better accuracy."""
    return run_wall <= script_fit and run_accuracy >= script_accuracy


def median_of_rounds(rounds: list[dict[str, dict]]) -> dict[str, dict]:
    """Each contender's figures as medians over the rounds (a time to TARGET over the rounds that
    reached it, `reached_rounds` saying how many). `ratio`: the median over the rounds of the
    contender's wall seconds over the same round's script training seconds, `ratio_range` their
    span; the whole run's `goal_met_rounds`: rounds it took at most the script's training
    seconds at equal or better accuracy."""
    combined = {}
    for name in rounds[0]:
        results = [found[name] for found in rounds]
        merged = {"rounds": len(rounds)}
        for key in FIGURES:
            values = [result[key] for result in results if result.get(key) is not None]
            if key in results[0]:
                merged[key] = statistics.median(values) if values else None
        merged["reached_rounds"] = sum(result.get("to_target_s") is not None for result in results)
        ratios = [found[name]["wall_s"] / found["script_fp32"]["fit_s"] for found in rounds]
        merged["ratio"] = statistics.median(ratios)
        merged["ratio_range"] = (min(ratios), max(ratios))
        combined[name] = merged
    combined["imgpipe_run"]["goal_met_rounds"] = sum(
        goal_met(
            found["imgpipe_run"]["wall_s"],
            found["imgpipe_run"]["eval_accuracy"],
            found["script_fp32"]["fit_s"],
            found["script_fp32"]["eval_accuracy"],
        )
        for found in rounds
    )
    return combined


def synthetic_limit(workdir: str) -> dict[str, dict]:
    """MobileNetV3Small at LIMIT_SIZE px: the Trainer's step on photo shards and on a synthetic
    batch."""
    from benchmarks.input_data import photo_shards
    from benchmarks.training_bench import measure_in_child

    shards = photo_shards(workdir, IMAGES[0])
    return {
        data: measure_in_child({**LIMIT_SPEC, **LIMIT_STEPS, "data": data, "shards": shards})
        for data in ("synthetic", "real")
    }


def run(workdir: str) -> list[dict]:
    records = []
    for dataset in DATASETS:
        for count in sizes(dataset):
            found = median_of_rounds([_contenders(workdir, dataset, count) for _ in range(ROUNDS)])
            for name, result in found.items():
                base = f"{PREFIX}.{dataset}.{count}.{name}"
                wall = {"name": f"{base}.wall_s", "value": result["wall_s"], "unit": "s"}
                wall.update(dataset=dataset, images=count, contender=name, rounds=result["rounds"])
                if name != "script_fp32":
                    # The goal: the whole run within the script's training alone.
                    wall.update(
                        baseline=f"{PREFIX}.{dataset}.{count}.script_fp32.fit_s",
                        ratio=result["ratio"],
                        ratio_range=result["ratio_range"],
                    )
                if "goal_met_rounds" in result:
                    wall["goal_met_rounds"] = result["goal_met_rounds"]
                records.append(wall)
                if name.startswith("script"):
                    records.append({"name": f"{base}.fit_s", "value": result["fit_s"], "unit": "s"})
                if result.get("images_per_s"):
                    records.append(
                        {
                            "name": f"{base}.images_per_s",
                            "value": result["images_per_s"],
                            "unit": "images/s",
                        }
                    )
                records.append(
                    {
                        "name": f"{base}.eval_accuracy",
                        "value": result["eval_accuracy"],
                        "unit": "accuracy",
                        "dataset": dataset,
                        "images": count,
                        "contender": name,
                    }
                )
                if result.get("to_target_s") is not None:
                    records.append(
                        {
                            "name": f"{base}.seconds_to_{TARGET:g}",
                            "value": result["to_target_s"],
                            "unit": "s",
                            "reached_rounds": result["reached_rounds"],
                        }
                    )
                if "peak_pss_mib" in result:
                    records.append(
                        {"name": f"{base}.peak_pss", "value": result["peak_pss_mib"], "unit": "MiB"}
                    )
    limit = synthetic_limit(workdir)
    for data in ("synthetic", "real"):
        record = {
            "name": f"{PREFIX}.mobilenet_v3_small_{LIMIT_SIZE}.{data}.images_per_s",
            "value": limit[data]["images_per_s"],
            "unit": "images/s",
        }
        if data == "real":
            record.update(
                baseline=f"{PREFIX}.mobilenet_v3_small_{LIMIT_SIZE}.synthetic.images_per_s",
                ratio=limit["real"]["images_per_s"] / limit["synthetic"]["images_per_s"],
            )
        records.append(record)
    return records


def chart(records: list[dict], path: str) -> None:
    """Per dataset and size: each contender's wall seconds, labelled with its eval accuracy."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    walls = [r for r in records if "contender" in r and r["unit"] == "s"]
    accuracy = {
        (r["dataset"], r["images"], r["contender"]): r["value"]
        for r in records
        if r.get("unit") == "accuracy"
    }
    groups = list(dict.fromkeys((r["dataset"], r["images"]) for r in walls))
    figure, axes = plt.subplots(1, max(len(groups), 1), figsize=(6 * max(len(groups), 1), 4.5))
    axes = axes if len(groups) > 1 else [axes]
    for axis, (dataset, count) in zip(axes, groups, strict=True):
        mine = [r for r in walls if (r["dataset"], r["images"]) == (dataset, count)]
        fits = {
            r["name"].split(".")[3]: r["value"]
            for r in records
            if r["name"].startswith(f"{PREFIX}.{dataset}.{count}.") and r["name"].endswith(".fit_s")
        }
        names = [r["contender"] for r in mine]
        bars = axis.bar(names, [r["value"] for r in mine], color="#4a7ab5")
        label_bars(
            axis,
            bars,
            [
                f"{r['value']:.0f} s\nacc {accuracy[(dataset, count, r['contender'])]:.3f}"
                for r in mine
            ],
        )
        if "script_fp32" in fits:
            axis.axhline(fits["script_fp32"], color="#c44e52", linestyle="--", linewidth=1)
            axis.annotate("script's fit()", (0, fits["script_fp32"]), color="#c44e52", fontsize=8)
        axis.set_title(f"{dataset}, {count:,} images")
        axis.set_ylabel("wall seconds")
        axis.tick_params(axis="x", labelsize=8)
    figure.suptitle("imgpipe vs the plain Keras script, same model and epochs")
    figure.tight_layout()
    figure.savefig(path, dpi=110)
    plt.close(figure)


def section(records: list[dict]) -> Section:
    """The table, and per dataset and size where the whole run stands against the goal: at most
    the script's training time, at equal or better accuracy."""
    by_name = {r["name"]: r for r in records}
    notes = []
    for record in records:
        if record.get("contender") != "imgpipe_run" or record["unit"] != "s":
            continue
        dataset, count = record["dataset"], record["images"]
        base = f"{PREFIX}.{dataset}.{count}"
        script_fit = by_name[f"{base}.script_fp32.fit_s"]["value"]
        script_acc = by_name[f"{base}.script_fp32.eval_accuracy"]["value"]
        run_acc = by_name[f"{base}.imgpipe_run.eval_accuracy"]["value"]
        rounds = record.get("rounds", 1)
        met = record.get(
            "goal_met_rounds", int(goal_met(record["value"], run_acc, script_fit, script_acc))
        )
        spread = ""
        if rounds > 1:
            low, high = record["ratio_range"]
            spread = f"; medians of {rounds} rounds, single rounds {low:.2f}x to {high:.2f}x"
        notes.append(
            f"{dataset}, {count:,} images: the whole `imgpipe run` took {record['value']:.0f} s, "
            f"{record['ratio']:.2f}x the script's training alone ({script_fit:.0f} s{spread}), "
            f"at eval accuracy {run_acc:.3f} against the script's {script_acc:.3f}: the goal "
            f"was met in {met} of {rounds} round{'s' if rounds > 1 else ''}."
        )
    if not any(r["name"].endswith("script_bf16.wall_s") for r in records):
        notes.append(
            "(b) mixed_bfloat16 was not run: this CPU has no native bfloat16 (amx_bf16 or "
            "avx512_bf16), where TensorFlow emulates it many times slower than float32."
        )
    return default_section(__doc__, records, notes=notes)


def headline(records: list[dict]) -> list[tuple[str, str]]:
    """Per dataset, at its largest size: the whole run's time against the script's training."""
    by_name = {r["name"]: r for r in records}
    largest: dict[str, int] = {}
    for name in by_name:
        parts = name.split(".")
        if parts[3:] == ["imgpipe_run", "wall_s"]:
            largest[parts[1]] = max(largest.get(parts[1], 0), int(parts[2]))
    rows = []
    for dataset, count in largest.items():
        base = f"{PREFIX}.{dataset}.{count}"
        run, fit = by_name[f"{base}.imgpipe_run.wall_s"], by_name[f"{base}.script_fp32.fit_s"]
        accuracy = by_name[f"{base}.imgpipe_run.eval_accuracy"]["value"]
        script_accuracy = by_name[f"{base}.script_fp32.eval_accuracy"]["value"]
        rows.append(
            (
                f"`imgpipe run`, ingest to push, against the script's training alone "
                f"({dataset}, {count:,} images)",
                f"{run['ratio']:.2f}x its time ({run['value']:.0f} s against {fit['value']:.0f} "
                f"s), eval accuracy {accuracy:.3f} against {script_accuracy:.3f}",
            )
        )
    return rows


def meaning(records: list[dict]) -> list[str]:
    return list(section(records).notes)
