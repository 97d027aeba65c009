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
from data_prep.image_validation import Reason
from data_prep.ingest import IngestOutputs, run_ingest
from data_prep.ingest_config import IngestConfig
from data_prep.ingest_outputs import read_source_index
from tests.data_prep.hostile_corpus import HOSTILE_CLASS, NON_UTF8_NAME, write_hostile_corpus

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
    with tempfile.TemporaryFile() as console:  # what reaches file descriptor 2 during the job
        saved = os.dup(2)
        os.dup2(console.fileno(), 2)
        try:
            report = run_ingest(config, outputs, IN_PROCESS)
        finally:
            os.dup2(saved, 2)
            os.close(saved)
        console.seek(0)
        made["console"] = console.read().decode(errors="replace")
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
    assert rejected[hostile + "bomb.png"]["reason"] == Reason.TOO_MANY_PIXELS
    assert "max_pixels 64000000" in rejected[hostile + "bomb.png"]["detail"]
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
