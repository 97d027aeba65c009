"""Thumbnails the pages show: rejected input files (where their bytes still decode) and the eval
images the model got wrong, read from the dataset's own shards (what the model was scored on).

Every image goes through Pillow under the ingest's limits (file size, pixel count from the header)
before anything is decoded, so a decompression bomb that the ingest refused is refused here too;
and, as in the ingest, it is decoded in a supervised child bounded in memory and time
(data_prep/runtime/supervised.py), so a file that crashes, hangs or blows up a decoder costs its
thumbnail, never the process showing the page.
"""

from __future__ import annotations

import functools
import io
import logging
import posixpath

from PIL import Image

from data_prep.reading.image_validation import ImageLimits
from data_prep.runtime import supervised

LOGGER = logging.getLogger(__name__)
THUMBNAIL_SIDE = 160
THUMBNAIL_TYPE = "image/jpeg"
INGEST_LIMITS = ImageLimits()  # the ingest's defaults: what it refuses is not decoded here either


def thumbnail(data: bytes, limits: ImageLimits = INGEST_LIMITS) -> bytes | None:
    """A JPEG at most THUMBNAIL_SIDE pixels a side, or None when the bytes are not a decodable
    image within the limits (limits.decoder_memory_bytes and decode_timeout_s included)."""
    if not data or len(data) > limits.max_file_bytes:
        return None
    # One child for the whole app: the web server's threads live for one request each.
    bounds = supervised.Bounds(limits.decoder_memory_bytes, limits.decode_timeout_s)
    small = supervised.call_shared(_thumbnail_in_child, (data, limits), bounds)
    return None if isinstance(small, supervised.Failure) else small


def _thumbnail_in_child(item: tuple[bytes, ImageLimits]) -> bytes | None:
    data, limits = item
    try:
        with Image.open(io.BytesIO(data)) as image:
            width, height = image.size
            if width * height > limits.max_pixels:
                return None
            image.draft("RGB", (THUMBNAIL_SIDE, THUMBNAIL_SIDE))  # JPEG: decode at a lower scale
            small = image.convert("RGB")
            small.thumbnail((THUMBNAIL_SIDE, THUMBNAIL_SIDE))
    except Exception:  # noqa: BLE001  any defect in the bytes means "no thumbnail", never a crash
        return None
    buffer = io.BytesIO()
    small.save(buffer, format="JPEG", quality=85)
    return buffer.getvalue()


def input_file(input_path: str, relative_path: str) -> str:
    """Where an input file recorded by its relative path lives: under the class-folder root, or
    beside the manifest (as data_prep.reading.sources resolves a manifest's relative paths)."""
    if relative_path.startswith("/") or "://" in relative_path:
        return relative_path
    from data_prep.reading.sources import MANIFEST_EXTENSIONS

    base = input_path
    if input_path.lower().endswith(MANIFEST_EXTENSIONS):
        base = posixpath.dirname(input_path)
    return posixpath.join(base, relative_path)


@functools.lru_cache(maxsize=4096)
def file_thumbnail(path: str, limits: ImageLimits = INGEST_LIMITS) -> bytes | None:
    """The thumbnail of a file (local or any Beam filesystem); None when it is gone, too large,
    no regular file (a pipe is never opened for reading) or does not decode."""
    from data_prep.reading.file_access import is_remote
    from data_prep.reading.files import read_file, read_upto

    try:
        if not is_remote(path):
            data = read_file(path, limits.max_file_bytes)
        else:
            from apache_beam.io.filesystems import FileSystems

            with FileSystems.open(path) as handle:
                data = read_upto(handle, limits.max_file_bytes + 1)
    except Exception:  # noqa: BLE001  each filesystem raises its own type; no thumbnail then
        return None
    return thumbnail(data, limits)


@functools.lru_cache(maxsize=16)
def split_thumbnails(split_dir: str, source_paths: tuple[str, ...]) -> dict[str, bytes]:
    """source path -> thumbnail of that example's image, for the wanted paths found in one split
    of an Examples artifact (one pass over its shards)."""
    import tensorflow as tf

    from components.evaluation.eval_split import read_batches

    files = sorted(tf.io.gfile.glob(posixpath.join(split_dir, "*")))
    wanted, found = set(source_paths), {}
    try:
        for batch in read_batches(files) if files else ():
            for path, image in zip(batch.source_paths, batch.images.numpy(), strict=True):
                if path in wanted and path not in found:
                    small = thumbnail(image)
                    if small is not None:
                        found[path] = small
            if len(found) == len(wanted):
                break
    except tf.errors.OpError as error:  # a damaged shard: the page goes without these images
        LOGGER.warning(
            "%s: a shard cannot be read (%s); its images are not shown", split_dir, error.message
        )
    return found
