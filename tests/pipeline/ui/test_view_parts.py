"""The UI's view data without a store: chart layout, graph layout, the timeline, the confusion
matrix's shades, thumbnails under the ingest's limits and bounds, where a rejected file lives,
loopback."""

import io
import os

import pytest
from PIL import Image

from data_prep.reading.image_validation import ImageLimits
from pipeline import lineage
from pipeline.ui import app, curves, graph_layout, media, views
from tests.data_prep import image_files
from tests.data_prep.misbehaving_decoder import HANG, OVER_ALLOCATE, SEGFAULT, misbehaving


def test_a_chart_keeps_each_tags_points_and_leaves_out_absent_tags():
    scalars = {"train/loss": [(0, 2.0), (5, 1.0), (10, 0.5)], "eval/loss": [(10, 0.8)]}
    chart = curves.chart("loss", scalars, ("train/loss", "eval/loss", "train/absent"))
    assert [s.tag for s in chart.series] == ["train/loss", "eval/loss"]
    assert chart.series[0].points == ((0, 2.0), (5, 1.0), (10, 0.5))
    assert chart.series[0].last == 0.5 and chart.value_range is None  # loss: fit to the values
    drawn = chart.data()
    assert drawn["x"] == "step" and drawn["series"][1] == {
        "label": "eval/loss",
        "points": [[10, 0.8]],
    }


def test_an_accuracy_axis_ends_at_one_so_a_small_change_looks_small():
    chart = curves.chart("accuracy", {"a": [(0, 0.9886), (1, 0.9993)]}, ("a",), "run", ("r1", "r2"))
    assert chart.value_range == (0.95, 1.0)
    assert chart.data()["names"] == ["r1", "r2"]
    assert curves.chart("accuracy", {"a": [(0, 0.01)]}, ("a",)).value_range == (0.0, 1.0)


def test_steps_become_epochs_from_where_the_per_epoch_tag_was_written():
    scalars = {"train/loss": [(4, 1.0), (8, 0.5)], "train/step_loss": [(2, 1.2), (8, 0.4)]}
    in_epochs, x_label = curves.in_epochs(scalars)
    assert x_label == "epoch"
    assert in_epochs["train/step_loss"] == [(0.5, 1.2), (2.0, 0.4)]
    resumed = {"train/loss": [(8, 0.5), (12, 0.4)]}  # a run resumed after its first epoch
    assert curves.in_epochs(resumed)[0]["train/loss"] == [(2.0, 0.5), (3.0, 0.4)]
    assert curves.in_epochs({"train/step_loss": [(2, 1.2)]}) == (
        {"train/step_loss": [(2, 1.2)]},
        "step",
    )


def test_a_chart_skips_values_that_are_not_finite_and_is_absent_without_any():
    scalars = {"a": [(0, float("nan")), (1, 1.0), (2, float("inf"))], "b": [(0, float("nan"))]}
    assert curves.chart("x", scalars, ("a",)).series[0].points == ((1, 1.0),)
    assert curves.chart("x", scalars, ("b",)) is None


def test_read_scalars_reads_what_tf_summary_writes(tmp_path):
    import tensorflow as tf

    writer = tf.summary.create_file_writer(str(tmp_path / curves.LOG_DIR))
    with writer.as_default():
        for step, value in enumerate([0.9, 0.7, 0.4]):
            tf.summary.scalar("train/loss", value, step=step)
    writer.close()
    scalars = curves.read_scalars(str(tmp_path))
    assert [step for step, _ in scalars["train/loss"]] == [0, 1, 2]
    assert [round(value, 5) for _, value in scalars["train/loss"]] == [0.9, 0.7, 0.4]


def test_graph_columns_follow_the_longest_path_from_a_source():
    edges = [
        ("gen", "examples"),
        ("examples", "trainer"),
        ("transform", "trainer"),
        ("examples", "transform"),
        ("trainer", "model"),
    ]
    assert graph_layout.columns(edges) == {
        "gen": 0,
        "examples": 1,
        "trainer": 3,
        "transform": 2,
        "model": 4,
    }


def test_graph_layout_places_edges_from_box_to_box_and_keeps_links():
    edges = [("A 1", "B #2", "x"), ("B #2", "C 3", "y"), ("A 1", "D 4", "z")]
    picture = graph_layout.lay_out(
        edges, is_execution=lambda label: "#" in label, link_for={"C 3": ("run", {})}.get
    )
    nodes = {node.label: node for node in picture.nodes}
    assert nodes["B #2"].is_execution and not nodes["A 1"].is_execution
    assert nodes["C 3"].link == ("run", {}) and nodes["A 1"].link is None
    first = picture.edges[0]
    assert first.x1 == nodes["A 1"].x + graph_layout.BOX_WIDTH and first.x2 == nodes["B #2"].x
    assert nodes["B #2"].y != nodes["D 4"].y  # same column, different rows
    assert picture.edges[0].path.startswith(f"M {first.x1} {first.y1} L ")
    assert picture.width >= nodes["C 3"].x + graph_layout.BOX_WIDTH


def _execution(component, started, seconds, state="ran"):
    return lineage.ExecutionRecord(1, component, state, started, seconds, ("r",), {})


def test_timeline_bars_sit_on_the_runs_time_axis():
    bars = views.timeline(
        [
            _execution("ImageExampleGen", "2026-01-01T00:00:00+00:00", 10.0),
            _execution("Trainer", "2026-01-01T00:00:10+00:00", 30.0),
            _execution("Pusher", "2026-01-01T00:00:40+00:00", 0.0, "cached"),
        ]
    )
    assert [(b.start, b.left, b.width) for b in bars] == [
        (0.0, 0.0, 0.25),
        (10.0, 0.25, 0.75),
        (40.0, 1.0, 0.0),
    ]
    assert bars[2].state == "cached" and views.timeline([]) == ()


def test_confusion_cells_shade_by_the_true_class_share():
    assert views.confusion_cells([[3, 1], [0, 0]]) == (((3, 0.75), (1, 0.25)), ((0, 0.0), (0, 0.0)))


def test_thumbnails_are_small_jpegs_and_nothing_for_bytes_that_do_not_decode():
    big = image_files.encode(Image.new("RGB", (640, 320), "red"), "PNG")
    small = Image.open(io.BytesIO(media.thumbnail(big)))
    assert small.format == "JPEG" and max(small.size) == media.THUMBNAIL_SIDE
    jpeg = image_files.jpeg()
    assert media.thumbnail(b"") is None
    assert media.thumbnail(b"not an image at all") is None
    assert media.thumbnail(jpeg[: len(jpeg) // 2]) is None  # truncated


def test_thumbnails_respect_the_ingests_limits():
    image = image_files.encode(Image.new("RGB", (100, 100)), "PNG")
    assert media.thumbnail(image, ImageLimits(max_pixels=100 * 100 - 1)) is None
    assert media.thumbnail(image, ImageLimits(max_file_bytes=len(image) - 1)) is None
    assert media.thumbnail(image, ImageLimits()) is not None


@pytest.mark.parametrize("how", [SEGFAULT, HANG, OVER_ALLOCATE])
def test_a_file_that_crashes_hangs_or_over_allocates_a_decoder_costs_its_thumbnail_only(how):
    """Decoded in a bounded child, as the ingest decodes: this process lives on and the next
    image still gets its thumbnail."""
    limits = ImageLimits(decoder_memory_bytes=256 * 1024 * 1024, decode_timeout_s=1.0)
    assert media.thumbnail(misbehaving(how), limits) is None
    assert media.thumbnail(image_files.jpeg(), limits) is not None


def test_a_file_thumbnail_never_opens_a_pipe_or_device(tmp_path):
    os.mkfifo(tmp_path / "pipe.jpg")  # a reader would wait for a writer for ever
    (tmp_path / "photo.png").write_bytes(image_files.encode(Image.new("RGB", (8, 8)), "PNG"))
    assert media.file_thumbnail(str(tmp_path / "pipe.jpg")) is None
    assert media.file_thumbnail("/dev/zero") is None
    assert media.file_thumbnail(str(tmp_path / "photo.png")) is not None


def test_a_damaged_eval_shard_costs_the_page_its_images_not_the_page(tmp_path):
    from tests.components.training.conftest import write_shard

    write_shard(str(tmp_path / "data-0.gz"), 0, 4)
    write_shard(str(tmp_path / "data-1.gz"), 4, 4)
    damaged = bytearray((tmp_path / "data-1.gz").read_bytes())
    damaged[len(damaged) // 2] ^= 0x01
    (tmp_path / "data-1.gz").write_bytes(bytes(damaged))
    found = media.split_thumbnails(str(tmp_path), ("a/0.jpg", "a/6.jpg"))
    assert set(found) <= {"a/0.jpg"}  # what came before the damage, at most


@pytest.mark.parametrize(
    "input_path, relative, expected",
    [
        ("/data/images", "cat/1.jpg", "/data/images/cat/1.jpg"),
        ("/data/list.csv", "cat/1.jpg", "/data/cat/1.jpg"),
        ("gs://b/list.jsonl", "cat/1.jpg", "gs://b/cat/1.jpg"),
        ("/data/list.csv", "/elsewhere/1.jpg", "/elsewhere/1.jpg"),
    ],
)
def test_a_rejected_file_is_found_where_the_ingest_read_it(input_path, relative, expected):
    assert media.input_file(input_path, relative) == expected


def test_an_edge_that_skips_a_column_bends_below_the_boxes_it_passes():
    picture = graph_layout.lay_out(
        [("A", "B", "x"), ("B", "C", "y"), ("A", "C", "z")], lambda label: False, {}.get
    )
    skipping = picture.edges[2]
    assert " C " in skipping.path and " L " not in skipping.path
    parts = skipping.path.replace(",", " ").split()  # M x1 y1 C cx1 cy1 cx2 cy2 x2 y2
    assert min(float(parts[5]), float(parts[7])) > skipping.y1 + graph_layout.BOX_HEIGHT / 2


def test_a_big_cluster_shows_twelve_thumbnails_and_the_rest_behind_a_toggle():
    import flask

    from pipeline.ui import health_page

    run = lineage.PipelineRun("r1", "imgpipe", "2026-01-01T00:00:00+00:00", 1.0, "complete", ())
    members = tuple(health_page.Shown(i, f"cat/{i}.jpg") for i in range(20))
    view = health_page.HealthView(
        run, {"near_duplicate_clusters": 1}, (members,), (), (), {}, "/health", "", {}
    )
    ui = app.create_app(lambda: None, "memory")
    with ui.test_request_context():
        page = flask.render_template("health.html", view=view)
    shown, _, hidden = page.partition('<details class="more">')
    assert shown.count("<figure>") == 12 and hidden.count("<figure>") == 8
    assert "and 8 more" in hidden


def test_twenty_suspects_show_twelve_and_a_mark_among_the_rest_keeps_them_open():
    import flask

    from pipeline.ui import health_page

    run = lineage.PipelineRun("r1", "imgpipe", "2026-01-01T00:00:00+00:00", 1.0, "complete", ())
    suspects = tuple(
        health_page.Shown(i, f"cat/{i}.jpg", "given cat, predicted dog (0.90)", "dog")
        for i in range(20)
    )
    view = health_page.HealthView(run, {}, (), suspects, (), {}, "/health", "/data", {})

    def rendered(marks: dict, review_path: str | None) -> str:
        ui = app.create_app(lambda: None, "memory", review_path=review_path)
        with ui.test_request_context():
            return flask.render_template("health.html", view=view, marks=marks, token="t0k")

    page = rendered({}, "/store/label-review.json")
    shown, _, hidden = page.partition('<details class="more">')
    assert shown.count('class="suspect"') == 12 and hidden.count('class="suspect"') == 8
    assert shown.count('name="token" value="t0k"') == 12
    marked = {"cat/15.jpg": {"verdict": "confirmed", "label": "dog"}}
    page = rendered(marked, "/store/label-review.json")
    assert '<details class="more" open>' in page and "confirmed: now dog" in page
    assert "1 confirmed, 0 wrong, 0 unsure" in page
    assert '<form method="post"' not in rendered({}, None)  # no review file: nothing to post


def test_the_data_filters_keep_what_they_name_and_pages_hold_two_hundred():
    from pipeline.ui import dataset_page

    Item = dataset_page.Item
    items = [
        Item(0, "cat/0.jpg", "cat", "train", ()),
        Item(1, "cat/1.jpg", "cat", "eval", ("dark",), "cat", 0.9),
        Item(2, "dog/2.jpg", "dog", "eval", ("near-duplicate",), "cat", 0.6),
    ]
    keep = dataset_page.Filters

    def kept(filters) -> list[int]:
        return [item.index for item in items if filters.keep(item)]

    assert kept(keep(label="cat")) == [0, 1]
    assert kept(keep(correct="no")) == [2] and kept(keep(correct="yes")) == [1]
    assert kept(keep(flag="dark")) == [1] and kept(keep(predicted="cat")) == [1, 2]
    assert kept(keep(low=0.5, high=0.7)) == [2]  # unscored images have no confidence
    unlabelled = Item(3, "/photos/x.jpg", "", "", (), "cat", 0.7)  # a predicted file, no label
    assert unlabelled.correct is None and not keep(correct="no").keep(unlabelled)
    assert keep(label="cat", low=0.5).arguments() == {"class": "cat", "low": 0.5}
    run = lineage.PipelineRun("r", "p", "2026-01-01T00:00:00+00:00", 1.0, "complete", ())
    many = tuple(Item(i, f"{i}.jpg", "cat", "train", ()) for i in range(450))
    found = dataset_page.Dataset(many, {}, run, 1)
    last = dataset_page.page(found, keep(), 9)  # past the end: the last page
    assert (last.page, last.pages, len(last.shown), last.matching) == (3, 3, 50, 450)
    assert [item.index for item in dataset_page.page(found, keep(), 2).shown][0] == 200
