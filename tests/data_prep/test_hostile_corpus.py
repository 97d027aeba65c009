"""The ingest over a generated corpus of hostile files: it finishes, accounts for every directory
entry, writes only images TensorFlow decodes as recorded, and ignores nothing Pillow decodes."""

import io
import logging
import os
import tempfile

import pytest
import tensorflow as tf
from PIL import Image

from data_prep.contract import features
from data_prep.ingest import IngestOutputs, run_ingest
from data_prep.ingest_config import IngestConfig
from data_prep.reading.image_validation import ImageLimits, Reason
from data_prep.writing.ingest_outputs import read_source_index
from tests.data_prep import image_files
from tests.data_prep.hostile_corpus import HOSTILE_CLASS, NON_UTF8_NAME, write_hostile_corpus
from tests.data_prep.misbehaving_decoder import HANG, OVER_ALLOCATE, SEGFAULT, misbehaving

pytestmark = pytest.mark.slow
IN_PROCESS = ["--direct_running_mode=in_memory", "--direct_num_workers=1"]
LOGGER = logging.getLogger(__name__)


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    root = tmp_path_factory.mktemp("hostile")
    made = write_hostile_corpus(root)
    out = tmp_path_factory.mktemp("out")
    outputs = IngestOutputs.under(str(out))
    config = IngestConfig(str(root), eval_fraction=0.5, max_reject_fraction=1.0)
    report, made["console"] = _run_capturing_fd2(config, outputs, IN_PROCESS)
    return root, made, outputs, report


def _pillow_decodes(path) -> bool:
    try:
        with Image.open(io.BytesIO(path.read_bytes())) as image:
            image.load()
        return True
    except Exception:  # noqa: BLE001
        return False


def test_every_entry_is_accounted_for_once(corpus):
    root, made, outputs, report = corpus
    totals = report["totals"]
    LOGGER.info("hostile corpus: %s, rejected by reason %s", totals, report["rejected_per_reason"])
    assert totals["found"] == made["files"] + made["links"]
    assert totals["found"] == totals["accepted"] + totals["rejected"] + totals["ignored"]
    accepted = [row["path"] for row in read_source_index(outputs.source_index_path)]
    named = accepted + [r["path"] for r in report["rejected"]] + report["ignored"]
    assert len(named) == len(set(named)) == totals["found"]


def test_links_loops_bombs_and_odd_names_have_their_outcome(corpus):
    _, _, outputs, report = corpus
    rejected = {r["path"]: r for r in report["rejected"]}
    hostile = HOSTILE_CLASS + "/"
    assert rejected[hostile + "loop"]["reason"] == Reason.SYMLINK_LOOP
    assert rejected[hostile + "self_link"]["reason"] == Reason.SYMLINK_LOOP
    assert rejected[hostile + "dangling.jpg"]["reason"] == Reason.BROKEN_LINK
    for bomb in ("bomb.png", "icon_holding_a_bomb.icns"):
        assert rejected[hostile + bomb]["reason"] == Reason.TOO_MANY_PIXELS
        assert "max_pixels 64000000" in rejected[hostile + bomb]["detail"]
    assert rejected[hostile + "float.tif"]["reason"] == Reason.UNSUPPORTED_MODE
    assert rejected[hostile + "zip_renamed.jpg"]["reason"] == Reason.NOT_AN_IMAGE
    assert "decoder said" in rejected[hostile + "lzw_bitflip.tif"]["detail"]
    accepted = {row["path"] for row in read_source_index(outputs.source_index_path)}
    escaped = NON_UTF8_NAME.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")
    assert hostile + escaped in accepted
    for name in ("trns_rgb.png", "trns_gray.png", "trns_palette.png", "photoshop.psd", "i16.png"):
        assert hostile + name in accepted
    assert set(report["ignored"]) >= {hostile + "README.txt", hostile + "archive.zip"}


def test_nothing_pillow_decodes_is_ignored(corpus):
    root, _, _, report = corpus
    decodable = [path for path in report["ignored"] if _pillow_decodes(root / path)]
    assert decodable == []


def test_every_accepted_image_decodes_to_three_channels_at_its_recorded_size(corpus):
    _, _, outputs, report = corpus
    files = [str(p) for p in tf.io.gfile.glob(f"{outputs.examples_dir}/Split-*/*.gz")]
    count = 0
    for record in tf.data.TFRecordDataset(files, compression_type="GZIP"):
        example = tf.io.parse_single_example(record, features.feature_spec())
        image = tf.io.decode_image(example[features.IMAGE], expand_animations=False)
        height, width = int(example[features.HEIGHT]), int(example[features.WIDTH])
        assert tuple(image.shape) == (height, width, 3), example[features.SOURCE_PATH]
        count += 1
    assert count == report["totals"]["accepted"]


def test_what_the_decoders_printed_is_in_the_report_not_on_the_console(corpus):
    _, made, _, report = corpus
    said = [
        r["detail"].split("decoder said: ", 1)[1]
        for r in report["rejected"]
        if "decoder said: " in r["detail"]
    ]
    assert said
    for text in said:
        for line in text.split(" | "):
            assert line not in made["console"]


def _run_capturing_fd2(config, outputs, beam_args) -> tuple[dict, str]:
    """The ingest's report, and what reached file descriptor 2 during the job."""
    with tempfile.TemporaryFile() as console:
        saved = os.dup(2)
        os.dup2(console.fileno(), 2)
        try:
            report = run_ingest(config, outputs, beam_args)
        finally:
            os.dup2(saved, 2)
            os.close(saved)
        console.seek(0)
        return report, console.read().decode(errors="replace")


# Beam's portable runner with its embedded job service; LOOPBACK runs the SDK workers here.
PORTABLE = ["--runner=PortableRunner", "--job_endpoint=embed", "--environment_type=LOOPBACK"]


@pytest.mark.parametrize("beam_args", [IN_PROCESS, PORTABLE], ids=["direct", "portable"])
def test_a_decoder_that_crashes_hangs_or_over_allocates_costs_exactly_its_file(tmp_path, beam_args):
    for class_index, label in enumerate(("alpha", "beta")):
        for i in range(6):
            path = tmp_path / "in" / label / f"{i}.jpg"
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(image_files.jpeg(seed=100 * class_index + i))
    misbehaviours = {
        "alpha/crash.jpg": (SEGFAULT, Reason.DECODER_CRASHED, "signal SIGSEGV"),
        "alpha/hang.jpg": (HANG, Reason.DECODE_TIMEOUT, "decode_timeout_s 2 s"),
        "beta/blow_up.jpg": (
            OVER_ALLOCATE,
            Reason.DECODER_MEMORY,
            f"decoder_memory_bytes {256 * 1024 * 1024}",
        ),
    }
    for relative, (how, _, _) in misbehaviours.items():
        (tmp_path / "in" / relative).write_bytes(misbehaving(how))
    limits = ImageLimits(decoder_memory_bytes=256 * 1024 * 1024, decode_timeout_s=2)
    config = IngestConfig(str(tmp_path / "in"), max_reject_fraction=1.0, limits=limits)
    outputs = IngestOutputs.under(str(tmp_path / "out"))
    report, console = _run_capturing_fd2(config, outputs, beam_args)
    assert report["status"] == "ok"
    assert report["totals"]["accepted"] == 12
    rejected = {r["path"]: r for r in report["rejected"]}
    assert set(rejected) == set(misbehaviours)
    for path, (_, reason, named) in misbehaviours.items():
        assert rejected[path]["reason"] == reason
        assert named in rejected[path]["detail"]
    assert "Fatal Python error" not in console and "Segmentation fault" not in console
