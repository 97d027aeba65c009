"""Beam's TFRecord checksums computed by google-crc32c while the pipeline runs.

Every TFRecord that Beam reads (StatisticsGen, Transform and the Evaluator read the examples
through apache_beam.io.tfrecordio) has a CRC32C checksum for each record's length and data, and
Beam checks both. Beam looks only for python-snappy's CRC32C and otherwise uses crcmod (the run
log says "Couldn't find python-snappy"). crcmod did about 165 MB/s here, so each full read of
2,000 photo examples (60 MB) spent 0.36 s on checksums. google-crc32c, which Beam's GCS client
already installs, computes the same checksums in hardware, 20x faster (0.018 s for those
2,000 records, side by side on the loaded machine). The checksums are identical, so files are
read and checked exactly as before.
The function is swapped only inside `hardware_checksums()` and put back afterwards. Beam's
worker processes (a multi-processing DirectRunner, a distributed runner) run Beam's own code
unchanged.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import google_crc32c
from apache_beam.io import tfrecordio


@contextlib.contextmanager
def hardware_checksums() -> Iterator[None]:
    """Beam's TFRecord CRC32C is google_crc32c.value in this process until the block exits."""
    # The slot Beam fills with the first CRC32C function it finds, and then reuses
    # (tfrecordio._default_crc32c_fn).
    slot = tfrecordio._default_crc32c_fn  # noqa: SLF001
    saved = slot.fn
    slot.fn = google_crc32c.value
    try:
        yield
    finally:
        slot.fn = saved
