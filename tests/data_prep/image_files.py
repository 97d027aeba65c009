"""Builds small image files of every kind the ingest must handle, in memory."""

import io

import numpy as np
from PIL import Image


def random_rgb(height: int = 24, width: int = 32, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).integers(0, 256, (height, width, 3), dtype=np.uint8)


def encode(image: Image.Image, fmt: str, **options) -> bytes:
    buffer = io.BytesIO()
    image.save(buffer, format=fmt, **options)
    return buffer.getvalue()


def jpeg(seed: int = 0, height: int = 24, width: int = 32) -> bytes:
    return encode(Image.fromarray(random_rgb(height, width, seed)), "JPEG", quality=90)


def png(seed: int = 0, height: int = 24, width: int = 32) -> bytes:
    return encode(Image.fromarray(random_rgb(height, width, seed)), "PNG")


def exif_rotated_jpeg() -> tuple[bytes, np.ndarray]:
    """A landscape JPEG whose EXIF says 'rotate 90 CW to view' (orientation 6), and the upright
    view: a portrait image with a bright top band."""
    upright = np.zeros((40, 24, 3), dtype=np.uint8)
    upright[:8] = 255  # bright band at the top of the upright picture
    stored = np.rot90(upright, k=1)  # what a camera stores before tagging orientation 6
    exif = Image.Exif()
    exif[0x0112] = 6
    return encode(
        Image.fromarray(np.ascontiguousarray(stored)), "JPEG", quality=95, exif=exif
    ), upright
