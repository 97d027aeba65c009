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
    entries = []
    for name in _MAP_ORDER:
        value = row[name]
        if name in _INT64:
            packed = _varint(int(value) & 0xFFFFFFFFFFFFFFFF)
            feature = _field(3, _field(1, packed))  # Feature.int64_list{value: packed}
        else:
            raw = value.encode() if isinstance(value, str) else bytes(value)
            feature = _field(1, _field(1, raw))  # Feature.bytes_list{value}
        entries.append(_field(1, _field(1, name.encode()) + _field(2, feature)))
    return _field(1, b"".join(entries))  # Example.features{feature: entries}


def _field(number: int, payload: bytes) -> bytes:
    """A length-delimited protobuf field."""
    return _varint(number << 3 | 2) + _varint(len(payload)) + payload


def _varint(value: int) -> bytes:
    out = bytearray()
    while True:
        byte, value = value & 0x7F, value >> 7
        out.append(byte | (0x80 if value else 0))
        if not value:
            return bytes(out)
