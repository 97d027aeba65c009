import pytest
import tensorflow as tf

from data_prep.contract import features

ROW = {
    features.IMAGE: b"\xff\xd8\x00binary\x80",
    features.IMAGE_FORMAT: "jpeg",
    features.HEIGHT: 375,
    features.WIDTH: 500,
    features.LABEL: 3,
    features.LABEL_NAME: "gâteau",
    features.SOURCE_PATH: "cakes/sub/a b.jpg",
    features.SHA256: "ab" * 32,
}


def _tf_example(row) -> tf.train.Example:
    feature = {}
    for name, value in row.items():
        if isinstance(value, int):
            feature[name] = tf.train.Feature(int64_list=tf.train.Int64List(value=[value]))
        else:
            raw = value.encode() if isinstance(value, str) else value
            feature[name] = tf.train.Feature(bytes_list=tf.train.BytesList(value=[raw]))
    return tf.train.Example(features=tf.train.Features(feature=feature))


@pytest.mark.parametrize("label", [0, 1, 127, 128, 300, 2**40, -1])
def test_serialization_equals_tensorflows_deterministic_bytes(label):
    row = {**ROW, features.LABEL: label}
    assert features.serialize_example(row) == _tf_example(row).SerializeToString(deterministic=True)


def test_serialized_example_parses_with_the_feature_spec():
    parsed = tf.io.parse_single_example(features.serialize_example(ROW), features.feature_spec())
    assert parsed[features.IMAGE].numpy() == ROW[features.IMAGE]
    assert parsed[features.LABEL_NAME].numpy().decode() == "gâteau"
    assert (parsed[features.HEIGHT].numpy(), parsed[features.WIDTH].numpy()) == (375, 500)


def test_large_payload_lengths_encode_as_multibyte_varints():
    row = {**ROW, features.IMAGE: bytes(range(256)) * 1000}
    assert features.serialize_example(row) == _tf_example(row).SerializeToString(deterministic=True)


def test_missing_feature_is_an_error():
    row = dict(ROW)
    del row[features.SHA256]
    with pytest.raises(ValueError, match="missing features \\['sha256'\\]"):
        features.serialize_example(row)
