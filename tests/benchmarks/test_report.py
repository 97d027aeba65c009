"""docs/performance.md's renderer: each part's section from its own records, the machine and date
they were measured on, and a part without a section of its own still shown."""

import types

from benchmarks import machine
from benchmarks.report import (
    RUN_KEY,
    Section,
    common_prefix,
    default_section,
    named,
    render,
    run_context,
)


def measured(part: str, *records: dict, context: dict | None = None) -> list[dict]:
    return [{**record, "part": part, RUN_KEY: context} for record in records]


CONTEXT = {
    "measured_at": "2026-01-02 03:04 UTC",
    "machine": {"cpu": "Test CPU", "cores": 4, "usable_cores": 2, "memory_gib": 7.5, "system": "X"},
    "load_average": 1.5,
    "settings": {"BENCH_RUNS": "1"},
}


def test_each_part_titles_its_table_and_notes_from_its_records():
    custom = types.ModuleType("custom", "Custom part: a title.\n\nMore text.")

    def section(records):
        rate = named(records, "rate")
        notes = (f"rate {rate['value']:.1f} images/s",)
        return default_section(custom.__doc__, records, notes=notes)

    custom.section = section
    plain = types.ModuleType("plain", "Plain part: the docstring's first line.")
    records = measured(
        "custom",
        {"name": "custom.rate", "value": 1234.56, "unit": "images/s"},
        {"name": "custom.other", "value": 0.5, "unit": "s", "baseline": "custom.x", "ratio": 2},
        context=CONTEXT,
    ) + measured("plain", {"name": "plain.a.b", "value": 3, "unit": "s"})

    page = render(records, {"plain": plain, "custom": custom})

    assert page.index("(`plain`)") < page.index("(`custom`)")  # the order parts are listed in
    assert "parts: `plain`, `custom`." in page
    assert "## Custom part: a title (`custom`)" in page
    assert "| rate | 1,235 | images/s |  |" in page
    assert "| other | 0.5 | s | 2.00x x |" in page
    assert "- rate 1234.6 images/s" in page
    assert (
        "Measured 2026-01-02 03:04 UTC on Test CPU, 4 cores (2 usable), 7.5 GiB memory, X, "
        "load average 1.5 at the start; settings: `BENCH_RUNS=1`." in page
    )
    assert "## Plain part: the docstring's first line (`plain`)" in page
    assert "| a.b | 3 | s |  |" in page  # a lone record keeps all but the part's name
    assert "Measured before results recorded their machine and date." in page


def test_names_lose_only_the_prefix_the_part_shares():
    assert common_prefix(["input.limit.cores", "input.limit.full.cpu"]) == "input.limit."
    assert common_prefix(["ingest.loop.5000.rate", "ingest.beam.5000.rate"]) == "ingest."
    assert common_prefix(["a.b", "a.b.c"]) == "a."  # never a whole name
    assert common_prefix(["solo.x.y"]) == "solo."


def test_a_part_no_longer_listed_still_shows_its_results():
    page = render(measured("gone", {"name": "gone.x", "value": 1, "unit": "s"}), {})
    assert "## gone (`gone`)" in page


def test_a_part_may_bring_its_own_columns():
    module = types.ModuleType("own")
    module.section = lambda records: Section("Own", ("a", "b"), (("1", "2|3"),))
    page = render(measured("own", {"name": "own.x", "value": 1}), {"own": module})
    assert "| a | b |\n|---|---|\n| 1 | 2\\|3 |" in page


def test_machine_read_from_proc_files(tmp_path):
    cpuinfo, meminfo = tmp_path / "cpuinfo", tmp_path / "meminfo"
    cpuinfo.write_text("processor\t: 0\nmodel name\t: Some CPU @ 2.0GHz\nflags\t: avx\n")
    meminfo.write_text("MemTotal:       16314312 kB\nMemFree:  1 kB\n")
    described = machine.describe(str(cpuinfo), str(meminfo))
    assert described["cpu"] == "Some CPU @ 2.0GHz"
    assert described["memory_gib"] == 15.6
    assert machine.summary(described).startswith("Some CPU @ 2.0GHz, ")


def test_run_context_keeps_only_the_benchmark_settings():
    context = run_context({"BENCH_INPUT_IMAGES": "1000", "HOME": "/root"})
    assert context["settings"] == {"BENCH_INPUT_IMAGES": "1000"}
    assert context["machine"]["cores"] >= 1


def test_ingest_and_pipeline_parts_note_their_headline_ratios():
    from benchmarks import ingest_bench, pipeline_bench

    ingest = measured(
        "ingest",
        {"name": "ingest.loop.5000.images_per_s", "value": 600, "unit": "images/s"},
        {
            "name": "ingest.beam.5000.images_per_s",
            "value": 480,
            "unit": "images/s",
            "baseline": "ingest.loop.5000.images_per_s",
            "ratio": 0.8,
        },
        {"name": "ingest.beam.5000.share_of_ceiling", "value": 0.5, "unit": "ratio", "ratio": 0.5},
        {"name": "ingest.beam.50.seconds", "value": 3.0, "unit": "s"},
    )
    assert ingest_bench.section(ingest).notes == (
        "On 5,000 photos the Beam job runs at 0.80x the loop, 0.50x the split loop (what the "
        "cores allow).",
    )
    pipeline = measured(
        "pipeline",
        {
            "name": "pipeline.2000.non_training_seconds",
            "value": 14.0,
            "unit": "s",
            "baseline": "pipeline.2000.Trainer.seconds",
            "ratio": 1.25,
        },
    )
    assert pipeline_bench.section(pipeline).notes == (
        "On 2,000 images the components other than the Trainer take 1.25x the Trainer's time.",
    )


def test_pipeline_part_names_components_that_grow_faster_than_linearly_and_memory_growth():
    from benchmarks import pipeline_bench

    def interval(name, low, high, value):
        return {
            "name": f"pipeline.{name}.ms_per_image_{low}_to_{high}",
            "value": value,
            "unit": "ms/image",
            "interval_of": name,
            "interval": [low, high],
        }

    def peak(images, value, ratio=None):
        record = {"name": f"pipeline.{images}.peak_pss", "value": value, "unit": "MiB"}
        record["memory_at"] = images
        return record if ratio is None else {**record, "ratio": ratio}

    pipeline = measured(
        "pipeline",
        interval("ImageExampleGen", 2000, 8000, 1.0),
        interval("ImageExampleGen", 8000, 32000, 1.2),
        interval("Evaluator", 2000, 8000, 0.5),
        interval("Evaluator", 8000, 32000, 0.9),
        interval("Pusher", 2000, 8000, -0.001),  # a fixed cost: its slopes are noise
        interval("Pusher", 8000, 32000, 0.002),
        peak(2000, 1000.0),
        peak(32000, 1500.0, ratio=1.5),
    )
    assert pipeline_bench.section(pipeline).notes == (
        "Evaluator grows faster than linearly: 0.5 ms per image between 2,000 and 8,000 images, "
        "0.9 between 8,000 and 32,000.",
        "Peak memory of the whole process tree: 1,000 MiB at 2,000 images, 1,500 MiB at 32,000 "
        "images (1.50x for 16x the images).",
    )


def test_pipeline_part_names_the_component_adding_most_memory_and_the_one_growing_most():
    from benchmarks import pipeline_bench

    def added(name, images, value):
        return {
            "name": f"pipeline.{images}.{name}.added_pss",
            "value": value,
            "unit": "MiB",
            "added_by": name,
            "added_at": images,
        }

    pipeline = measured(
        "pipeline",
        added("ImageExampleGen", 2000, 50.0),
        added("ImageExampleGen", 32000, 400.0),
        added("Trainer", 2000, 300.0),
        added("Trainer", 32000, 500.0),
    )
    assert pipeline_bench.section(pipeline).notes == (
        "At 32,000 images Trainer adds the most memory: 500 MiB.",
        "What ImageExampleGen adds grows most: 50 MiB at 2,000 images, 400 MiB at 32,000.",
    )


def test_pipeline_part_says_where_the_beam_components_left_the_run_process():
    from benchmarks import pipeline_bench

    def workers(images, value):
        return {
            "name": f"pipeline.{images}.beam_worker_processes",
            "value": value,
            "unit": "processes",
            "workers_at": images,
        }

    pipeline = measured("pipeline", workers(2000, 0), workers(8000, 0), workers(32000, 2))
    assert pipeline_bench.section(pipeline).notes == (
        "The Beam components ran in the run's own process at 2,000 and 8,000 images and in 2 "
        "worker processes at 32,000: the memory StatisticsGen, Transform and Evaluator add there "
        "includes those processes, each of which imports TensorFlow.",
    )
    assert pipeline_bench.section(measured("pipeline", workers(2000, 0))).notes == ()


def test_a_component_adds_its_peak_less_the_lowest_sample_before_that_peak():
    from benchmarks.pipeline_bench import memory_added

    samples = (
        (10.0, 100),
        (11.0, 500),
        (12.0, 300),
        (13.0, 700),
        (14.0, 200),
        (15.0, 900),  # the serving check's process, still alive in the sample before the Evaluator
        (16.0, 400),
        (17.0, 600),
    )
    added = memory_added(
        samples,
        {
            "Before": (9.0, 10.5),  # no sample before it started
            "Ingest": (10.5, 12.5),
            "Trainer": (12.5, 14.5),  # its memory drops after its peak
            "Pusher": (14.6, 14.8),  # ran between two samples
            "Evaluator": (15.5, 17.5),
        },
    )
    assert added == {"Ingest": 400, "Trainer": 400, "Evaluator": 200}


def test_pipeline_line_through_the_sizes_gives_fixed_cost_and_cost_per_image():
    from benchmarks.pipeline_bench import fit_line

    fixed, per_image_ms = fit_line(
        [2000, 8000, 32000], [5.0 + 0.002 * n for n in (2000, 8000, 32000)]
    )
    assert round(fixed, 6) == 5.0 and round(per_image_ms, 6) == 2.0


def test_health_part_gives_the_ingest_cost_as_a_median_with_its_spread_and_the_signals_share():
    from benchmarks.health_bench import _cost_note

    ingest = {"value": 2.04, "lowest": 1.81, "highest": 2.73, "rounds": 9}
    assert _cost_note(ingest, {"value": 0.254}) == (
        "ingest CPU per image: median of 9 rounds 2.04 ms, the rounds from 1.81 to 2.73 ms; the "
        "health signals take 25% of it"
    )
