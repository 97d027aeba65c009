"""Ingest speed and memory: the Beam job against a plain single-process loop, side by side.

Each contender runs in its own process (benchmarks/process_tree.py), so the peak memory covers
the whole job, Beam's workers included.

Sizes come from the environment so a quick run is possible; `make bench` uses the defaults:
  BENCH_INGEST_IMAGES  the two input sizes in photo-like JPEGs (default "5000 20000")
  BENCH_INGEST_RUNS    timed runs of each contender, the fastest counts (default 2)
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import sys
import time

from benchmarks.charts import label_bars, value_and_ratio
from benchmarks.photo_data import write_photo_jpegs
from benchmarks.process_tree import reap_orphans_at_exit, run_measured
from benchmarks.report import Section, default_section

MEMORY_SAMPLE_S = 0.05
TITLE = "The ingest job against a plain loop"
SMALL, LARGE = (int(n) for n in os.environ.get("BENCH_INGEST_IMAGES", "5000 20000").split())
RUNS = int(os.environ.get("BENCH_INGEST_RUNS", "2"))


def ingest_loop(input_dir: str, output_dir: str) -> int:
    """The plain loop an engineer would write first: one pass, one process, the same per-file
    checks, conversion, dedupe, split, Example encoding and writer as the Beam job; returns the
    number of examples written."""
    from data_prep.reading.sources import list_sources

    sources = list_sources(input_dir)
    return _loop_over(sources, _labels(sources), input_dir, output_dir, part=(0, 1))


def ingest_split_loop(input_dir: str, output_dir: str) -> int:
    """The ceiling two cores allow: the loop's work dealt out to one forked process per core,
    each with its own files and writers, nothing planned, coded or handed between them (so
    duplicates across processes are not found: a little less work than the loop's). No job can
    beat it on the same cores; how close the Beam job comes is its own overhead."""
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    from data_prep.reading.sources import list_sources
    from data_prep.runtime.cores import usable_cores

    sources = list_sources(input_dir)
    labels, parts = _labels(sources), usable_cores()
    with ProcessPoolExecutor(parts, mp_context=multiprocessing.get_context("fork")) as pool:
        counts = pool.map(
            _loop_over,
            [sources[part::parts] for part in range(parts)],
            [labels] * parts,
            [input_dir] * parts,
            [output_dir] * parts,
            [(part, parts) for part in range(parts)],
        )
        return sum(counts)


def _labels(sources) -> list[str]:
    return sorted({s.label for s in sources if s.label})


def _loop_over(sources, labels, input_dir: str, output_dir: str, part: tuple[int, int]) -> int:
    """Writes the accepted, first-seen images of sources into one shard per split, numbered
    part = (index, count); returns the number of examples written."""
    from data_prep.contract import features
    from data_prep.ingest_config import IngestConfig
    from data_prep.reading.image_validation import Accepted, validate_image
    from data_prep.reading.inspection import read_source
    from data_prep.writing.plan import SHARD_PATTERN, split_of
    from data_prep.writing.tfrecord import GzipTFRecordWriter

    config = IngestConfig(input=input_dir)
    writers, seen, written = {}, set(), 0
    for source in sources:
        data = read_source(source, config.limits.max_file_bytes + 1)
        image = validate_image(data, config.limits)
        if not isinstance(image, Accepted) or source.label is None:
            continue
        sha = hashlib.sha256(data).hexdigest()
        if sha in seen:
            continue
        seen.add(sha)
        split = split_of(sha, config.eval_fraction, config.test_fraction)
        if split not in writers:
            shard = SHARD_PATTERN.format(split=split, index=part[0], count=part[1])
            writers[split] = GzipTFRecordWriter(f"{output_dir}/{shard}")
        row = {
            features.IMAGE: image.encoded,
            features.IMAGE_FORMAT: image.image_format,
            features.HEIGHT: image.height,
            features.WIDTH: image.width,
            features.LABEL: labels.index(source.label),
            features.LABEL_NAME: source.label,
            features.SOURCE_PATH: source.relative_path,
            features.SHA256: sha,
        }
        writers[split].write(features.serialize_example(row))
        written += 1
    for writer in writers.values():
        writer.__exit__(None, None, None)
    return written


def ingest_beam(input_dir: str, output_dir: str) -> int:
    """What `imgpipe prep` runs, imports included."""
    from data_prep.ingest import IngestOutputs, run_ingest
    from data_prep.ingest_config import IngestConfig

    report = run_ingest(IngestConfig(input=input_dir), IngestOutputs.under(output_dir))
    return report["totals"]["accepted"]


CONTENDERS = {
    "loop": ingest_loop,
    "split_loop": ingest_split_loop,
    "beam": ingest_beam,
}


def _measure(contender: str, input_dir: str, output_dir: str, memory: bool) -> dict:
    """Runs one contender in a child process; returns its timing and its CPU time, or, with
    memory, the tree's peak memory (sampling perturbs the times: benchmarks/process_tree.py)."""
    command = [
        sys.executable,
        "-m",
        "benchmarks.ingest_bench",
        "--contender",
        contender,
        "--input",
        input_dir,
        "--output",
        output_dir,
    ]
    finished = run_measured(command, sample_every_s=MEMORY_SAMPLE_S if memory else None)
    if finished.returncode != 0:
        raise RuntimeError(f"{contender} ingest failed with exit code {finished.returncode}")
    result = json.loads(finished.stdout.strip().splitlines()[-1])
    if memory:
        return {
            "peak_rss_bytes": finished.peak_rss_bytes,
            "peak_pss_bytes": finished.peak_pss_bytes,
        }
    return {**result, "cpu_s": finished.cpu_seconds}


def _best_of(runs: int, contenders: tuple[str, ...], input_dir: str, workdir: str) -> dict:
    """Per contender, the fastest of several timed runs and the least CPU time; for the Beam job,
    the peak memory of one more run that samples it. The contenders take turns, run after run,
    so a change in the load of the shared, noisy machine falls on all of them."""
    timed = {contender: [] for contender in contenders}
    for _ in range(runs):
        for contender in contenders:
            timed[contender].append(
                _measure(contender, input_dir, f"{workdir}/{contender}", memory=False)
            )
    best = {
        contender: {
            **min(runs_of, key=lambda result: result["seconds"]),
            "cpu_s": min(result["cpu_s"] for result in runs_of),
        }
        for contender, runs_of in timed.items()
    }
    if "beam" in best:
        best["beam"].update(_measure("beam", input_dir, f"{workdir}/beam", memory=True))
    return best


def run(workdir: str, small: int = SMALL, large: int = LARGE, runs: int = RUNS) -> list[dict]:
    records = []
    beam = {}
    for count, seed in ((small, 1), (large, 2)):
        data = write_photo_jpegs(f"{workdir}/data/photos_{count}", count, seed=seed)
        best = _best_of(runs, ("loop", "split_loop", "beam"), data, f"{workdir}/out/{count}")
        loop, ceiling, beam[count] = best["loop"], best["split_loop"], best["beam"]
        if loop["examples"] != beam[count]["examples"]:
            raise RuntimeError(f"contenders disagree: {loop} vs {beam[count]}")
        loop_name = f"ingest.loop.{count}.images_per_s"
        loop_rate, beam_rate = count / loop["seconds"], count / beam[count]["seconds"]
        ceiling_name = f"ingest.split_loop.{count}.images_per_s"
        ceiling_rate = count / ceiling["seconds"]
        records += [
            {"name": loop_name, "value": loop_rate, "unit": "images/s"},
            {
                "name": ceiling_name,
                "value": ceiling_rate,
                "unit": "images/s",
                "baseline": loop_name,
                "ratio": ceiling_rate / loop_rate,
            },
            {
                "name": f"ingest.beam.{count}.images_per_s",
                "value": beam_rate,
                "unit": "images/s",
                "baseline": loop_name,
                "ratio": beam_rate / loop_rate,
            },
            {
                # How much of what the cores allow the job reaches.
                "name": f"ingest.beam.{count}.share_of_ceiling",
                "value": beam_rate / ceiling_rate,
                "unit": "ratio",
                "baseline": ceiling_name,
                "ratio": beam_rate / ceiling_rate,
            },
            {"name": f"ingest.loop.{count}.cpu_seconds", "value": loop["cpu_s"], "unit": "s"},
            {
                "name": f"ingest.beam.{count}.cpu_seconds",
                "value": beam[count]["cpu_s"],
                "unit": "s",
                "baseline": f"ingest.loop.{count}.cpu_seconds",
                "ratio": beam[count]["cpu_s"] / loop["cpu_s"],
            },
        ]
    # The job's fixed cost (start-up of the runner, stage barriers), measured on a tiny input;
    # what remains of each run is the per-image cost.
    tiny_dir = write_photo_jpegs(f"{workdir}/data/photos_50", 50, seed=3)
    fixed = _best_of(runs, ("beam",), tiny_dir, f"{workdir}/out/50")["beam"]["seconds"]
    records.append({"name": "ingest.beam.50.seconds", "value": fixed, "unit": "s"})
    for count in (small, large):
        loop_rate = next(
            r["value"] for r in records if r["name"] == f"ingest.loop.{count}.images_per_s"
        )
        marginal = (count - 50) / (beam[count]["seconds"] - fixed)
        records.append(
            {
                "name": f"ingest.beam.{count}.marginal_images_per_s",
                "value": marginal,
                "unit": "images/s",
                "baseline": f"ingest.loop.{count}.images_per_s",
                "ratio": marginal / loop_rate,
            }
        )
    # RSS summed over the tree counts the pages a forked child shares with its parent once per
    # process; PSS counts them once: the memory the job really takes.
    for measure in ("rss", "pss"):
        for count in (small, large):
            key = f"peak_{measure}_bytes"
            record = {
                "name": f"ingest.beam.{count}.peak_{measure}",
                "value": beam[count][key] / 2**20,
                "unit": "MiB",
            }
            if count == large:
                record["baseline"] = f"ingest.beam.{small}.peak_{measure}"
                record["ratio"] = beam[large][key] / beam[small][key]
            records.append(record)
    return records


def chart(records: list[dict], path: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    speed = [r for r in records if r["unit"] == "images/s"]
    speed.sort(key=lambda r: (int(r["name"].split(".")[2]), r["name"]))
    memory = [r for r in records if r["unit"] == "MiB"]
    figure, (left, right) = plt.subplots(1, 2, figsize=(11, 4))
    for axis, group, title in (
        (left, speed, "throughput (images/s)"),
        (right, memory, "peak memory, whole process tree (MiB; RSS and PSS sums)"),
    ):
        names = [
            r["name"]
            .removeprefix("ingest.")
            .replace(".marginal_images_per_s", "\nper image")
            .replace(".images_per_s", "")
            .replace(".peak_rss", " RSS")
            .replace(".peak_pss", " PSS")
            for r in group
        ]
        bars = axis.bar(names, [r["value"] for r in group], color="#4a7ab5")

        label_bars(axis, bars, [value_and_ratio(record) for record in group])
        axis.set_title(title)
        axis.tick_params(axis="x", labelsize=8)
    figure.suptitle("Ingest: Beam DirectRunner (in process, forked children) vs a plain loop")
    figure.tight_layout()
    figure.savefig(path, dpi=110)
    plt.close(figure)


def _child_main() -> None:
    reap_orphans_at_exit()
    parser = argparse.ArgumentParser()
    parser.add_argument("--contender", choices=sorted(CONTENDERS), required=True)
    parser.add_argument("--input", required=True)
    parser.add_argument("--output", required=True)
    args = parser.parse_args()
    import shutil

    shutil.rmtree(args.output, ignore_errors=True)
    contender = CONTENDERS[args.contender]
    started = time.perf_counter()
    examples = contender(args.input, args.output)
    seconds = time.perf_counter() - started
    print(json.dumps({"examples": examples, "seconds": seconds}))


def section(records: list[dict]) -> Section:
    """The table, and per input size how the job compares with the loop and the split loop."""
    notes = []
    for record in records:
        parts = record["name"].split(".")
        if parts[1] == "beam" and parts[-1] == "images_per_s" and "ratio" in record:
            share = next(
                (r for r in records if r["name"] == f"ingest.beam.{parts[2]}.share_of_ceiling"),
                None,
            )
            note = (
                f"On {int(parts[2]):,} photos the Beam job runs at {record['ratio']:.2f}x the loop"
            )
            if share:
                note += f", {share['ratio']:.2f}x the split loop (what the cores allow)"
            notes.append(note + ".")
    return default_section(__doc__, records, notes=notes)


def headline(records: list[dict]) -> list[tuple[str, str]]:
    rates = [
        r
        for r in records
        if r["name"].startswith("ingest.beam.")
        and r["name"].endswith(".images_per_s")
        and "ratio" in r
    ]
    if not rates:
        return []
    largest = max(rates, key=lambda r: int(r["name"].split(".")[2]))
    return [
        (
            f"The ingest job against a single-process loop "
            f"({int(largest['name'].split('.')[2]):,} photos)",
            f"{largest['ratio']:.2f}x the loop's images/s ({largest['value']:,.0f} images/s)",
        )
    ]


if __name__ == "__main__":
    _child_main()
