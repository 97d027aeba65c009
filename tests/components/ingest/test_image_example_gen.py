"""ImageExampleGen inside a real TFX pipeline (LocalDagRunner, SQLite MLMD) on tiny data."""

import json
import os

import pytest
import tensorflow as tf
from ml_metadata.metadata_store import metadata_store
from tfx.components import SchemaGen, StatisticsGen
from tfx.orchestration import metadata
from tfx.orchestration.local.local_dag_runner import LocalDagRunner
from tfx.orchestration.pipeline import Pipeline
from tfx.types import artifact_utils

from components.artifacts import IngestReport
from components.ingest.image_example_gen import ImageExampleGen
from components.ingest.ingest_report_reader import IngestReportRecord
from data_prep.contract import features
from data_prep.ingest_config import IngestConfig
from data_prep.reading.sources import input_fingerprint
from pipeline.config.beam_options import resolve_beam_args
from tests.data_prep import image_files

pytestmark = pytest.mark.slow
# An earlier span's ids, which known classes keep: pear stays 0, the new apple gets the next id.
REFERENCE_LABEL_MAP = {"pear": 0}


def _run(root, images) -> None:
    config = IngestConfig(input=str(images), max_reject_fraction=0.2).validate()
    example_gen = ImageExampleGen(
        ingest_config=config.to_json(),
        input_fingerprint=input_fingerprint(str(images)),
        span=3,
        reference_label_map=json.dumps(REFERENCE_LABEL_MAP),
        previous_source_index="",
    )
    statistics_gen = StatisticsGen(examples=example_gen.outputs["examples"])
    schema_gen = SchemaGen(statistics=statistics_gen.outputs["statistics"])
    pipeline = Pipeline(
        pipeline_name="example_gen_test",
        pipeline_root=str(root / "tfx"),
        components=[example_gen, statistics_gen, schema_gen],
        metadata_connection_config=metadata.sqlite_metadata_connection_config(
            str(root / "metadata.db")
        ),
        beam_pipeline_args=list(resolve_beam_args((), input_files=31)),
    )
    LocalDagRunner().run(pipeline)


def _store(root) -> metadata_store.MetadataStore:
    return metadata_store.MetadataStore(
        metadata.sqlite_metadata_connection_config(str(root / "metadata.db"))
    )


@pytest.fixture(scope="module")
def run_root(tmp_path_factory):
    root = tmp_path_factory.mktemp("run")
    images = root / "images"
    for label_index, label in enumerate(("apple", "pear")):
        for i in range(15):
            path = images / label / f"{i}.jpg"
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(image_files.jpeg(seed=1000 * label_index + i))
    (images / "pear" / "broken.jpg").write_bytes(b"not a jpeg")
    (images / "docs").mkdir()
    (images / "docs" / "README.txt").write_bytes(b"how these photos were taken")
    _run(root, images)
    return root


@pytest.fixture(scope="module")
def pipeline_run(run_root):
    return _store(run_root)


def test_examples_artifact_is_standard(pipeline_run):
    [examples] = pipeline_run.get_artifacts_by_type("Examples")[:1]
    assert artifact_utils.decode_split_names(examples.properties["split_names"].string_value) == [
        "eval",
        "train",
    ]
    assert examples.custom_properties["payload_format"].string_value == "FORMAT_TF_EXAMPLE"
    # The class set downstream executors size themselves from (docs/ holds no image).
    assert json.loads(examples.custom_properties["label_map"].string_value) == {
        "pear": 0,
        "apple": 1,
    }
    files = tf.io.gfile.glob(f"{examples.uri}/Split-train/*.gz")
    record = next(iter(tf.data.TFRecordDataset(files, compression_type="GZIP")))
    parsed = tf.io.parse_single_example(record, features.feature_spec())
    assert tf.io.decode_jpeg(parsed[features.IMAGE]).shape[-1] == 3


def test_ingest_report_is_an_artifact_in_mlmd(pipeline_run):
    [report] = pipeline_run.get_artifacts_by_type(IngestReport.TYPE_NAME)[:1]
    props = report.custom_properties
    assert props["found"].int_value == 32
    assert props["accepted"].int_value == 30
    assert props["rejected"].int_value == 1
    assert props["ignored"].int_value == 1
    assert json.loads(props["label_map"].string_value) == {"pear": 0, "apple": 1}
    assert json.loads(props["classes_left_out"].string_value) == ["docs"]
    record = IngestReportRecord.read(report)  # the reader beside the writer
    assert record.label_map == {"pear": 0, "apple": 1}
    assert record.counts == {"found": 32, "accepted": 30, "rejected": 1, "ignored": 1}
    assert record.classes_left_out == ("docs",)
    assert (record.span, record.uri) == (3, report.uri)
    with open(record.report_path) as handle:
        assert json.load(handle)["totals"] == record.counts
    assert os.path.exists(record.source_index_path)


def test_statistics_and_schema_read_the_examples_unchanged(pipeline_run):
    [schema] = pipeline_run.get_artifacts_by_type("Schema")[:1]
    text = tf.io.gfile.GFile(f"{schema.uri}/schema.pbtxt").read()
    for name in (features.IMAGE, features.LABEL, features.SOURCE_PATH):
        assert f'name: "{name}"' in text
