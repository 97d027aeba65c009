"""A generated folder of hostile input: every format Pillow writes (whole, truncated and
bit-flipped), awkward pixel modes and transparency, multi-frame files, formats with no magic,
non-images, links that go nowhere or in circles, and a file name that is not UTF-8."""

from __future__ import annotations

import os
import pathlib
import struct
import zipfile
import zlib

import numpy as np
from PIL import Image

from tests.data_prep import image_files

HOSTILE_CLASS = "hostile"
GOOD_CLASSES = ("alpha", "beta")
GOOD_PER_CLASS = 12
NON_UTF8_NAME = os.fsdecode(b"bad\xff\xfe0.jpg")


def _rgb(seed: int, height: int = 24, width: int = 32) -> Image.Image:
    return Image.fromarray(image_files.random_rgb(height, width, seed))


def _saved_by_every_writer() -> dict[str, bytes]:
    """One small image in every format Pillow can write (in the first mode it accepts)."""
    extension_of = {}
    for extension, fmt in Image.registered_extensions().items():
        extension_of.setdefault(fmt, extension)
    files = {}
    for index, fmt in enumerate(sorted(Image.SAVE)):
        for mode in ("RGB", "L", "1"):
            try:
                data = image_files.encode(_rgb(200 + index).convert(mode), fmt)
            except Exception:  # noqa: BLE001  this writer takes no such mode, or needs a tool
                continue
            files[f"writer_{fmt.lower()}{extension_of.get(fmt, '.bin')}"] = data
            break
    return files


def _damaged(files: dict[str, bytes]) -> dict[str, bytes]:
    """Each file cut in half, and with a few of its bytes flipped past the first 16."""
    damaged = {}
    rng = np.random.default_rng(7)
    for name, data in files.items():
        stem, extension = os.path.splitext(name)
        damaged[f"{stem}_truncated{extension}"] = data[: len(data) // 2]
        flipped = bytearray(data)
        for position in rng.integers(min(16, len(data) - 1), len(data), size=8):
            flipped[position] ^= 0xFF
        damaged[f"{stem}_bitflip{extension}"] = bytes(flipped)
    return damaged


def _png_chunk(kind: bytes, payload: bytes) -> bytes:
    return (
        struct.pack(">I", len(payload))
        + kind
        + payload
        + struct.pack(">I", zlib.crc32(kind + payload))
    )


def _png_bomb(side: int) -> bytes:
    """A small file whose header announces side x side pixels."""
    ihdr = struct.pack(">IIBBBBB", side, side, 8, 2, 0, 0, 0)
    return (
        b"\x89PNG\r\n\x1a\n"
        + _png_chunk(b"IHDR", ihdr)
        + _png_chunk(b"IDAT", zlib.compress(bytes(4096)))
        + _png_chunk(b"IEND", b"")
    )


def _icns_holding(png: bytes) -> bytes:
    """An Apple icon that declares 256x256, whose 256x256 slot holds `png` (of any size)."""
    block = b"ic08" + struct.pack(">I", 8 + len(png)) + png
    return b"icns" + struct.pack(">I", 8 + len(block)) + block


def _psd(seed: int, height: int = 20, width: int = 28) -> bytes:
    """A minimal uncompressed RGB Photoshop file (Pillow reads PSD but cannot write it)."""
    planes = image_files.random_rgb(height, width, seed).transpose(2, 0, 1)
    header = b"8BPS" + struct.pack(">H6xHIIHH", 1, 3, height, width, 8, 3)
    return header + struct.pack(">III", 0, 0, 0) + struct.pack(">H", 0) + planes.tobytes()


def _modes_and_transparency() -> dict[str, bytes]:
    rgb = _rgb(300)
    gray = rgb.convert("L")
    ramp = np.linspace(0, 65535, 24 * 32).reshape(24, 32)
    frames = [_rgb(310 + i).convert("P") for i in range(3)]
    return {
        "trns_rgb.png": image_files.encode(rgb, "PNG", transparency=tuple(np.asarray(rgb)[0, 0])),
        "trns_gray.png": image_files.encode(gray, "PNG", transparency=int(np.asarray(gray)[0, 0])),
        "trns_palette.png": image_files.encode(rgb.convert("P"), "PNG", transparency=0),
        "palette_transparency.gif": image_files.encode(rgb.convert("P"), "GIF", transparency=3),
        "la.png": image_files.encode(rgb.convert("LA"), "PNG"),
        "i16.png": image_files.encode(Image.fromarray(ramp.astype(np.uint16)), "PNG"),
        "i32.tif": image_files.encode(Image.fromarray(ramp.astype(np.int32)), "TIFF"),
        "float.tif": image_files.encode(Image.fromarray(ramp.astype(np.float32)), "TIFF"),
        "cmyk.jpg": image_files.encode(rgb.convert("CMYK"), "JPEG"),
        "cmyk.tif": image_files.encode(rgb.convert("CMYK"), "TIFF"),
        "ycbcr.jpg": image_files.encode(rgb.convert("YCbCr"), "JPEG"),
        "ycbcr.tif": image_files.encode(rgb.convert("YCbCr"), "TIFF"),
        "animated.png": image_files.encode(
            frames[0], "PNG", save_all=True, append_images=frames[1:]
        ),
        "animated.gif": image_files.encode(
            frames[0], "GIF", save_all=True, append_images=frames[1:]
        ),
        "pages.tif": image_files.encode(frames[0], "TIFF", save_all=True, append_images=frames[1:]),
        "icon.ico": image_files.encode(rgb, "ICO", sizes=[(16, 16), (32, 32)]),
        "targa.tga": image_files.encode(rgb, "TGA"),
        "targa_no_extension": image_files.encode(rgb, "TGA"),
        "photoshop.psd": _psd(320),
        "lzw.tif": image_files.encode(rgb, "TIFF", compression="tiff_lzw"),  # decoded by libtiff
        "bomb.png": _png_bomb(100_000),
        "icon_holding_a_bomb.icns": _icns_holding(_png_bomb(100_000)),
    }


def _not_images() -> dict[str, bytes]:
    archive_path = "archive.zip"
    import io

    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        archive.writestr("inside.txt", "hello")
    return {
        "README.txt": b"Photos of things, sorted by class.\n",
        "labels.json": b'{"alpha": 0, "beta": 1}',
        archive_path: buffer.getvalue(),
        "zip_renamed.jpg": buffer.getvalue(),
        "empty.png": b"",
    }


def write_hostile_corpus(root: pathlib.Path) -> dict[str, int]:
    """Writes the corpus under root (good class folders plus HOSTILE_CLASS); returns how many
    directory entries of each kind it made: files, links (three: a loop, a self-link and a
    dangling one)."""
    for class_index, label in enumerate(GOOD_CLASSES):
        for i in range(GOOD_PER_CLASS):
            path = root / label / f"{i:02d}.jpg"
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(image_files.jpeg(seed=1000 * (class_index + 1) + i))
    hostile = root / HOSTILE_CLASS
    hostile.mkdir(parents=True)
    writers = _saved_by_every_writer()
    images = {**writers, **_modes_and_transparency()}
    files = {**images, **_damaged(images), **_not_images()}
    files[NON_UTF8_NAME] = image_files.jpeg(seed=330)
    for name, data in files.items():
        (hostile / name).write_bytes(data)
    os.symlink(".", hostile / "loop")  # a folder link back to its own folder
    os.symlink("self_link", hostile / "self_link")
    os.symlink("missing.jpg", hostile / "dangling.jpg")
    return {"files": len(files) + len(GOOD_CLASSES) * GOOD_PER_CLASS, "links": 3}
