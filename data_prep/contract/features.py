"""The data contract: the tf.train.Example features every stage reads and writes.

Ingest, Transform, the trainer, serving and evaluation all import the names from here, so a
renamed feature breaks loudly in one place instead of silently in five.

Examples are serialized here without TensorFlow: Beam workers that only write Examples then skip
TensorFlow's import, which cost more than inspecting a whole 5,000-image dataset. The bytes equal
`tf.train.Example.SerializeToString(deterministic=True)` (a test proves it), and unlike tfx_bsl's
Arrow encoder they are the same on every run, so shards are reproducible.
"""

from __future__ import annotations

IMAGE = "image"  # encoded bytes: JPEG or PNG, 8-bit RGB, EXIF orientation already applied
IMAGE_FORMAT = "image_format"  # one of IMAGE_FORMATS
IMAGE_FORMATS = ("jpeg", "png")  # what the ingest writes: every other format is converted
HEIGHT = "height"
WIDTH = "width"
LABEL = "label"  # int64 id from the label map
LABEL_NAME = "label_name"
SOURCE_PATH = "source_path"  # path relative to the ingest input, for lineage and error reports
SHA256 = "sha256"  # hex digest of the original file's bytes

_BYTES = (IMAGE, IMAGE_FORMAT, LABEL_NAME, SOURCE_PATH, SHA256)
_INT64 = (HEIGHT, WIDTH, LABEL)
FEATURE_NAMES = _BYTES + _INT64
_MAP_ORDER = tuple(sorted(FEATURE_NAMES))  # deterministic protobuf writes map entries by key


def feature_spec() -> dict:
    """The tf.io parsing spec of one Example (every feature present exactly once)."""
    import tensorflow as tf

    spec = {name: tf.io.FixedLenFeature([], tf.string) for name in _BYTES}
    spec.update({name: tf.io.FixedLenFeature([], tf.int64) for name in _INT64})
    return spec


def serialize_example(row: dict) -> bytes:
    """Serializes one row (every feature name -> bytes/str/int) as a tf.train.Example."""
    missing = set(FEATURE_NAMES) - set(row)
    if missing:
        raise ValueError(f"example is missing features {sorted(missing)}")
    # Example.features{feature: map entries {key, Feature{bytes_list or int64_list{value}}}}: each
    # value's nested headers are built around it, so the image's bytes are copied once, by the
    # final join (nesting them field by field copied them five times).
    parts = [b""]  # the Example's own header, once its length is known
    for name in _MAP_ORDER:
        value = row[name]
        if name in _INT64:
            payload, list_number = _varint(int(value) & 0xFFFFFFFFFFFFFFFF), 3  # int64_list
        else:
            payload = value.encode() if isinstance(value, str) else bytes(value)
            list_number = 1  # bytes_list
        value_header = _header(1, len(payload))
        list_length = len(value_header) + len(payload)
        list_header = _header(list_number, list_length)
        feature_length = len(list_header) + list_length
        feature_header = _header(2, feature_length)
        key = _KEY_FIELDS[name]
        entry_header = _header(1, len(key) + len(feature_header) + feature_length)
        parts += (entry_header, key, feature_header, list_header, value_header, payload)
    parts[0] = _header(1, sum(map(len, parts)))
    return b"".join(parts)


def _header(number: int, length: int) -> bytes:
    """The tag and length of a length-delimited protobuf field (field numbers below 16)."""
    return bytes((number << 3 | 2,)) + _varint(length)


def _varint(value: int) -> bytes:
    if value < 0x80:
        return bytes((value,))
    out = bytearray()
    while True:
        byte, value = value & 0x7F, value >> 7
        out.append(byte | (0x80 if value else 0))
        if not value:
            return bytes(out)


_KEY_FIELDS = {name: _header(1, len(name.encode())) + name.encode() for name in FEATURE_NAMES}
