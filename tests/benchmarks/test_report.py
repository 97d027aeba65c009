"""docs/performance.md's writer: the headline table first, a short section per part from its
own records with the date and settings they were measured with, "not measured" for a part
without results, at most 150 lines, and links into it that resolve."""

import pathlib
import re
import types

from benchmarks import machine
from benchmarks.report import (
    RUN_KEY,
    Section,
    anchor,
    common_prefix,
    named,
    render,
    run_context,
)

ROOT = pathlib.Path(__file__).resolve().parents[2]
MAX_LINES = 150


def measured(part: str, *records: dict, context: dict | None = None) -> list[dict]:
    return [{**record, "part": part, RUN_KEY: context} for record in records]


CONTEXT = {
    "measured_at": "2026-01-02 03:04 UTC",
    "machine": {"cpu": "Test CPU", "cores": 4, "usable_cores": 2, "memory_gib": 7.5, "system": "X"},
    "load_average": 1.5,
    "settings": {"BENCH_RUNS": "1"},
}


def _part(name: str, doc: str, **functions) -> types.ModuleType:
    module = types.ModuleType(name, doc)
    for key, value in functions.items():
        setattr(module, key, value)
    return module


def test_the_headline_table_comes_first_then_a_section_per_part():
    custom = _part(
        "custom",
        "Custom part: a title.",
        TITLE="Custom title",
        headline=lambda records: [("rate", f"{named(records, 'rate')['value']:,.0f} images/s")],
        meaning=lambda records: [f"It reads {named(records, 'rate')['value']:.1f} images/s."],
    )
    plain = _part("plain", "Plain part: the docstring's first line.")
    waiting = _part("waiting", "Waiting.", TITLE="Not run yet", headline=lambda records: [])
    records = measured(
        "custom", {"name": "custom.rate", "value": 1234.56, "unit": "images/s"}, context=CONTEXT
    ) + measured("plain", {"name": "plain.a.b", "value": 3, "unit": "s"})

    page = render(records, {"plain": plain, "custom": custom, "waiting": waiting}, {"custom"})

    assert page.startswith("# Performance\n")
    assert "2 of 3 parts have results; measured on Test CPU, 4 cores (2 usable)" in page
    headline = page.split("## Headline\n", 1)[1].split("\n## ", 1)[0]
    assert "| rate | 1,235 images/s | [custom](#custom-title-custom) |" in headline
    assert "| Not run yet | not measured in this run | [waiting](#not-run-yet-waiting) |" in (
        headline
    )
    assert "plain" not in headline  # a part without a headline has no row
    assert page.index("(`plain`)") < page.index("(`custom`)") < page.index("(`waiting`)")
    assert (
        "## Custom title (`custom`)\nIt reads 1234.6 images/s. (Measured 2026-01-02 03:04 "
        "UTC, load average 1.5; `BENCH_RUNS=1`.)\n\n![custom](performance/custom.png)" in page
    )
    assert "## Plain part: the docstring's first line (`plain`)\n(Measured before" in page
    assert "![plain]" not in page  # no chart beside the page
    assert "## Not run yet (`waiting`)\nNot measured in this run: `make bench PARTS=waiting`" in (
        page
    )
    assert "1234.56" not in page  # raw figures stay in results.json


def test_a_part_shown_whole_gives_its_own_table_under_the_headline():
    module = _part(
        "transfer",
        "Transfer.",
        section=lambda records: Section("Own", ("a", "b"), (("1", "2|3"),), ("note",)),
    )
    page = render(measured("transfer", {"name": "transfer.x", "value": 1}), {"transfer": module})
    assert (
        "**Own** ([transfer](#transfer-transfer)):\n\n| a | b |\n|---|---|\n| 1 | 2\\|3 |" in page
    )
    assert page.index("**Own**") < page.index("## Transfer (`transfer`)")
    assert "## Transfer (`transfer`)\nNote. (Measured before" in page  # notes mean it
    assert "**Transfer**: not measured in this run." in render([], {"transfer": module})


def test_the_page_of_every_part_with_results_and_charts_stays_under_150_lines():
    """Every part of `make bench`, each with the most the real parts give: two headline rows, a
    long meaning and a chart; the transfer table's six rows."""
    from benchmarks.run import PARTS

    def stand_in(name):
        return _part(
            name,
            f"{name} part.",
            headline=lambda records: [("what", "measured"), ("what else", "measured")],
            meaning=lambda records: ["A sentence." * 20, "Another."],
            section=lambda records: Section("T", ("a",), (("1",),) * 6),
        )

    parts = {name: stand_in(name) for name in PARTS}
    records = [r for name in PARTS for r in measured(name, {"name": f"{name}.x", "value": 1})]
    page = render(records, parts, set(PARTS))
    assert "## Headline\n\n| what | measured | part |" in page
    assert len(page.splitlines()) <= MAX_LINES


def test_the_page_of_the_real_parts_without_results_names_each_unmeasured():
    from benchmarks.run import PARTS

    page = render([], PARTS)
    assert "## Headline\n\n| what | measured | part |" in page
    assert page.count("Not measured in this run: `make bench PARTS=") == len(PARTS)
    assert len(page.splitlines()) <= MAX_LINES


def test_links_to_the_page_resolve_whatever_parts_were_measured():
    """Section titles are constants: an anchor another page links to exists in the page written
    from no results and in the page as committed."""
    from benchmarks.run import PARTS

    linked = {
        anchor
        for page in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
        for anchor in re.findall(r"performance\.md#([\w-]+)", page.read_text())
    }
    committed, empty = ROOT / "docs" / "performance.md", render([], PARTS)
    assert linked  # other pages do link into it
    assert linked <= _anchors(committed.read_text())
    assert linked <= _anchors(empty)
    page_links = set(re.findall(r"\]\(#([\w-]+)\)", committed.read_text()))
    assert page_links <= _anchors(committed.read_text())  # the headline's links to sections


def test_the_committed_page_is_written_by_the_bench_and_short():
    text = (ROOT / "docs" / "performance.md").read_text()
    assert text.startswith("# Performance\n\nWritten by `make bench`")
    assert "## Headline\n\n| what | measured | part |" in text
    assert len(text.splitlines()) <= MAX_LINES


def _anchors(page: str) -> set[str]:
    return {anchor(heading) for heading in re.findall(r"^#+ (.+)$", page, flags=re.MULTILINE)}


def test_names_lose_only_the_prefix_the_part_shares():
    assert common_prefix(["input.limit.cores", "input.limit.full.cpu"]) == "input.limit."
    assert common_prefix(["ingest.loop.5000.rate", "ingest.beam.5000.rate"]) == "ingest."
    assert common_prefix(["a.b", "a.b.c"]) == "a."  # never a whole name
    assert common_prefix(["solo.x.y"]) == "solo."


def test_a_part_no_longer_listed_still_shows_its_results():
    page = render(measured("gone", {"name": "gone.x", "value": 1, "unit": "s"}), {})
    assert "## gone (`gone`)\n(Measured before" in page


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
