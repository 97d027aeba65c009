"""The Transform module's statistics, computed with TFT on Beam, against plain TensorFlow."""

import numpy as np
import pytest
import tensorflow as tf
import tensorflow_transform as tft
import tensorflow_transform.beam as tft_beam
from tensorflow_transform.tf_metadata import dataset_metadata, metadata_io

from components.training.preprocessing import compute_normalization
from components.training.transform import (
    FORCE_TF_COMPAT_V1,
    IMAGE_SIZE_KEY,
    normalization_from_transform,
    preprocessing_fn,
)
from data_prep.contract import features
from data_prep.writing.tfrecord import GzipTFRecordWriter
from tests.data_prep import image_files

pytestmark = pytest.mark.slow
IMAGE_SIZE = 32


def _rows():
    rows = []
    for i, label in enumerate(["cat"] * 5 + ["dog"] * 3):
        rows.append(
            {
                features.IMAGE: image_files.jpeg(seed=i, height=40 + i, width=50),
                features.IMAGE_FORMAT: "jpeg",
                features.HEIGHT: 40 + i,
                features.WIDTH: 50,
                features.LABEL: int(label == "dog"),
                features.LABEL_NAME: label,
                features.SOURCE_PATH: f"{label}/{i}.jpg",
                features.SHA256: f"{i:064x}",
            }
        )
    return rows


@pytest.fixture(scope="module")
def transform_output(tmp_path_factory):
    root = tmp_path_factory.mktemp("tft")
    # The schema SchemaGen infers for our Examples: every feature present once, shape [1].
    spec = {
        name: tf.io.FixedLenFeature([1], feature.dtype)
        for name, feature in features.feature_spec().items()
    }
    metadata = dataset_metadata.DatasetMetadata.from_feature_spec(spec)
    raw = [
        {name: [value.encode() if isinstance(value, str) else value] for name, value in row.items()}
        for row in _rows()
    ]
    with tft_beam.Context(temp_dir=str(root / "tmp"), force_tf_compat_v1=FORCE_TF_COMPAT_V1):
        transform_fn = (raw, metadata) | tft_beam.AnalyzeDataset(
            lambda inputs: preprocessing_fn(inputs, {IMAGE_SIZE_KEY: IMAGE_SIZE})
        )
        _ = transform_fn | tft_beam.WriteTransformFn(str(root / "graph"))
    # TFX's Transform executor also stores the raw metadata beside the graph.
    metadata_io.write_metadata(
        metadata, str(root / "graph" / tft.TFTransformOutput.RAW_METADATA_DIR)
    )
    return tft.TFTransformOutput(str(root / "graph")), root


def test_pixel_statistics_match_plain_tensorflow(transform_output, tmp_path):
    output, _ = transform_output
    shard = str(tmp_path / "shard.gz")
    with GzipTFRecordWriter(shard) as writer:
        for row in _rows():
            writer.write(features.serialize_example(row))
    expected = compute_normalization([shard], IMAGE_SIZE)
    found = normalization_from_transform(output)
    np.testing.assert_allclose(found.mean, expected.mean, rtol=1e-4)
    np.testing.assert_allclose(found.std, expected.std, rtol=1e-3)


def test_the_graph_holds_statistics_only_no_vocabulary(transform_output):
    """Class names and counts come from the label map and the ingest report; a vocabulary here
    would be a second source of the class set, and Beam stages on every run."""
    _, root = transform_output
    assert not (root / "graph" / tft.TFTransformOutput.TRANSFORM_FN_DIR / "assets").exists()
