"""Writes (and checks) gzip TFRecord files on any Beam filesystem without importing TensorFlow.

The record framing (length, masked CRC-32C of the length, data, masked CRC-32C of the data) is
TensorFlow's documented format; tests read every file back with tf.data.TFRecordDataset.
"""

from __future__ import annotations

import gzip
import struct
import zlib

import google_crc32c
from apache_beam.io.filesystem import CompressionTypes
from apache_beam.io.filesystems import FileSystems

# The gzip container TFX readers expect, with stored (level 0) deflate blocks: JPEG and PNG payloads
# are already compressed, so deflating them saves almost no bytes and costs a large share of the
# ingest's CPU.
GZIP_LEVEL = 0
_MASK_DELTA = 0xA282EAD8


def _masked_crc(data: bytes) -> bytes:
    crc = google_crc32c.value(data)
    masked = (((crc >> 15) | (crc << 17)) + _MASK_DELTA) & 0xFFFFFFFF
    return struct.pack("<I", masked)


class GzipTFRecordWriter:
    """Streams records into `path`; the file appears under its name only once complete."""

    def __init__(self, path: str):
        self._path, self._partial = path, path + ".incomplete"
        self._raw = FileSystems.create(
            self._partial, compression_type=CompressionTypes.UNCOMPRESSED
        )
        # No name and mtime=0 in the gzip header: identical records give identical files.
        self._gzip = gzip.GzipFile(
            filename="", fileobj=self._raw, mode="wb", compresslevel=GZIP_LEVEL, mtime=0
        )

    def write(self, record: bytes) -> None:
        length = struct.pack("<Q", len(record))
        # One write per record: each GzipFile.write is a deflate call and a file write.
        self._gzip.write(b"".join((length, _masked_crc(length), record, _masked_crc(record))))

    def __enter__(self) -> GzipTFRecordWriter:
        return self

    def __exit__(self, error_type, error, traceback) -> None:
        self._gzip.close()
        self._raw.close()
        if error_type is None:
            FileSystems.rename([self._partial], [self._path])
        else:
            FileSystems.delete([self._partial])


def shard_problem(path: str) -> str | None:
    """What is wrong with a gzip TFRecord file (a gzip stream that does not decompress, a record
    cut short, a length or data CRC-32C that does not match), naming the record's offset in the
    uncompressed stream; None when every record is whole."""
    offset = 0
    try:
        with FileSystems.open(path, compression_type=CompressionTypes.UNCOMPRESSED) as raw:
            with gzip.GzipFile(fileobj=raw, mode="rb") as stream:
                while header := stream.read(12):
                    if len(header) < 12:
                        return f"record at {offset} cut short"
                    length_bytes, length_crc = header[:8], header[8:]
                    if _masked_crc(length_bytes) != length_crc:
                        return f"corrupted record at {offset}: its length fails its CRC"
                    (length,) = struct.unpack("<Q", length_bytes)
                    body = stream.read(length + 4)
                    if len(body) < length + 4:
                        return f"record at {offset} cut short"
                    if _masked_crc(body[:length]) != body[length:]:
                        return f"corrupted record at {offset}: its data fails its CRC"
                    offset += 12 + length + 4
    except (OSError, EOFError, zlib.error) as error:  # gzip's own checks: CRC, size, stream
        return f"gzip stream unreadable after record {offset}: {error}"
    return None
