"""Checks one file's bytes and brings the image to the one form training can decode with tf.io.

Every outcome is explicit: an `Accepted` image (8-bit RGB JPEG or PNG, upright) or a `Rejected`
one with a reason, whatever the bytes make Pillow or its C libraries do. The limits come in
layers: the configured ones on the header, Pillow's own bomb guard set to the same pixel limit
(it also sees the images nested in ICNS, ICO, TIFF and other containers), and `validate_bounded`,
which decodes in a supervised child bounded in memory and time
(data_prep/runtime/supervised.py). Every format Pillow can open is tried, identified from the
bytes, never from the file name. The original bytes are kept whenever they already satisfy the
contract, so a JPEG is never compressed twice.
"""

from __future__ import annotations

import dataclasses
import functools
import io
import warnings

import numpy as np
from PIL import Image, ImageOps, UnidentifiedImageError

from data_prep.quality.health import ImageSignals, image_signals
from data_prep.runtime import supervised
from data_prep.runtime.native_stderr import capture_native_stderr

_JPEG_FAMILY = ("JPEG", "MPO")
_LIKELY_FORMATS = ("JPEG", "PNG", "WEBP", "GIF", "BMP", "TIFF")
_EXIF_ORIENTATION = 0x0112
# Transparent pixels are composited on white, as a viewer shows them.
_BACKGROUND = (255, 255, 255)


class Reason:
    """Why a file was rejected; the ingest report counts files per reason."""

    EMPTY = "empty"
    NOT_AN_IMAGE = "not_an_image"
    UNSUPPORTED_FORMAT = "unsupported_format"
    FILE_TOO_LARGE = "file_too_large"
    TOO_MANY_PIXELS = "too_many_pixels"
    TRUNCATED = "truncated"
    CORRUPT = "corrupt"
    UNSUPPORTED_MODE = "unsupported_mode"
    UNREADABLE = "unreadable"
    NO_LABEL = "no_label"
    DUPLICATE = "duplicate"
    CONFLICTING_LABEL = "conflicting_label"
    CHANGED_DURING_INGEST = "changed_during_ingest"
    DECODE_FAILED = "decode_failed"  # Pillow raised something unforeseen on these bytes
    DECODER_MEMORY = supervised.DECODER_MEMORY  # over limits.decoder_memory_bytes
    DECODE_TIMEOUT = supervised.DECODE_TIMEOUT  # over limits.decode_timeout_s
    DECODER_CRASHED = supervised.DECODER_CRASHED  # the decoder's process died (the signal says how)
    BROKEN_LINK = "broken_link"
    SYMLINK_LOOP = "symlink_loop"


@dataclasses.dataclass(frozen=True)
class ImageLimits:
    """Per-image limits and encoding choices.

    Attributes:
      max_file_bytes: files larger than this are refused without being decoded.
      max_pixels: decompression-bomb guard, checked on the header's width x height, and by
        Pillow's own guard on every image nested inside a file.
      max_side: when set, larger images are downscaled so their longer side equals it.
      jpeg_quality: quality used when a JPEG source has to be re-encoded.
      decoder_memory_bytes: memory (address space) one file's decode may take; a file that needs
        more is rejected as decoder_memory.
      decode_timeout_s: seconds one file's decode may take; a slower file is rejected as
        decode_timeout.
    """

    max_file_bytes: int = 64 * 1024 * 1024
    max_pixels: int = 64_000_000
    max_side: int | None = None
    jpeg_quality: int = 95
    decoder_memory_bytes: int = 1024 * 1024 * 1024
    decode_timeout_s: float = 30.0


@dataclasses.dataclass(frozen=True)
class Accepted:
    encoded: bytes
    image_format: str  # "jpeg" or "png"
    height: int
    width: int
    source_format: str  # as identified from the bytes, e.g. "WEBP"
    conversions: tuple[str, ...]  # empty when the original bytes were kept
    signals: ImageSignals | None = None  # near-duplicate hash and odd-image flags (health.py)


@dataclasses.dataclass(frozen=True)
class Rejected:
    reason: str
    detail: str


# Signatures of image formats, to tell "an image we cannot decode" from "not an image at all".
_SIGNATURES = (
    (0, b"\xff\xd8\xff", "JPEG"),
    (0, b"\x89PNG\r\n\x1a\n", "PNG"),
    (0, b"GIF8", "GIF"),
    (0, b"BM", "BMP"),
    (0, b"II*\x00", "TIFF"),
    (0, b"MM\x00*", "TIFF"),
    (8, b"WEBP", "WEBP"),
    (4, b"ftypheic", "HEIC"),
    (4, b"ftypheix", "HEIC"),
    (4, b"ftypmif1", "HEIF"),
    (4, b"ftypavif", "AVIF"),
)


def signature_format(data: bytes) -> str | None:
    """The image format named by the file's magic bytes, whether or not we can decode it."""
    for offset, magic, name in _SIGNATURES:
        if data[offset : offset + len(magic)] == magic:
            return name
    return None


def _open(data: bytes, max_pixels: int) -> Image.Image:
    """Opens lazily (header only), trying every format Pillow knows, with Pillow's own
    decompression-bomb guard refusing more than max_pixels (it raises above twice its setting)
    in this image and in any image nested in it."""
    Image.init()  # registers every plugin once
    Image.MAX_IMAGE_PIXELS = (max_pixels + 1) // 2
    return Image.open(io.BytesIO(data), formats=_format_order(len(Image.ID)))


@functools.cache
def _format_order(registered: int) -> tuple[str, ...]:
    """Every format Pillow has registered, the common photo formats first: the order only
    decides how soon a file's format is found (half of the open cost of a JPEG), not whether."""
    del registered  # the cache key: a plugin registered later gives a new order
    return (*_LIKELY_FORMATS, *(name for name in Image.ID if name not in _LIKELY_FORMATS))


def _ignore_pillow_warnings() -> None:
    """Pillow's warnings (EXIF, format quirks) are ours to decide: a filter on its modules, added
    again when something (a test runner) reset the filters. Not warnings.catch_warnings: it swaps
    the process-wide filters, so threads validating files at once would restore each other's."""
    warnings.filterwarnings("ignore", module=r"PIL(\.|$)")


def identify_format(data: bytes) -> str | None:
    """Returns the image format named by the bytes' header, or None if they are not an image
    (an image too large for the default pixel limit names its signature's format, or "image")."""
    _ignore_pillow_warnings()
    with capture_native_stderr():
        try:
            with _open(data, ImageLimits.max_pixels) as image:
                return image.format
        except Image.DecompressionBombError:
            return signature_format(data) or "image"
        except Exception:  # noqa: BLE001  Pillow raises many types for non-images
            return None


def validate_bounded(data: bytes, limits: ImageLimits) -> Accepted | Rejected:
    """validate_image in this thread's supervised child, bounded by limits.decoder_memory_bytes
    and limits.decode_timeout_s; a decode that overruns them, or kills its process, rejects
    this file with the reason (decoder_memory, decode_timeout, decoder_crashed) and the next
    file gets a new child. Never raises."""
    bounds = supervised.Bounds(limits.decoder_memory_bytes, limits.decode_timeout_s)
    result = supervised.call_bounded(_validate_in_child, (data, limits), bounds)
    if isinstance(result, supervised.Failure):
        return Rejected(result.reason, result.detail)
    return result


def _validate_in_child(item: tuple[bytes, ImageLimits]) -> Accepted | Rejected:
    data, limits = item
    return validate_image(data, limits)


def validate_image(
    data: bytes, limits: ImageLimits, *, with_signals: bool = True
) -> Accepted | Rejected:
    """Validates and normalizes one image file's bytes; raises only MemoryError (a decode this
    process cannot hold: validate_bounded turns it into a rejection). What C libraries print
    meanwhile is kept off the console and, for a rejected file, added to its detail. Without
    signals, an accepted image carries none: for a caller that only needs its encoding again."""
    _ignore_pillow_warnings()
    with capture_native_stderr() as native:
        try:
            result = _validate(data, limits, with_signals)
        except MemoryError:
            raise
        except Exception as error:  # noqa: BLE001  one file's bytes must never stop the job
            result = Rejected(Reason.DECODE_FAILED, f"{type(error).__name__}: {error}")
    if isinstance(result, Rejected) and native and native[0].strip():
        chatter = " | ".join(line.strip() for line in native[0].splitlines() if line.strip())
        result = Rejected(result.reason, f"{result.detail}; decoder said: {chatter[:500]}")
    return result


def _validate(data: bytes, limits: ImageLimits, with_signals: bool) -> Accepted | Rejected:
    if not data:
        return Rejected(Reason.EMPTY, "file is empty")
    if len(data) > limits.max_file_bytes:
        return Rejected(
            Reason.FILE_TOO_LARGE,
            f"more than max_file_bytes {limits.max_file_bytes} bytes",
        )
    try:
        image = _open(data, limits.max_pixels)
    except Image.DecompressionBombError as error:
        return _bomb(error, limits, "the image")
    except MemoryError:
        raise
    except UnidentifiedImageError:
        named = signature_format(data)
        if named in Image.OPEN:  # a format Pillow reads, whose header it could not parse
            return Rejected(Reason.CORRUPT, f"{named} signature, but its header cannot be read")
        if named:
            return Rejected(
                Reason.UNSUPPORTED_FORMAT, f"{named} signature, but no decoder for it is installed"
            )
        return Rejected(Reason.NOT_AN_IMAGE, "no image format Pillow knows in the file's bytes")
    except Exception as error:  # noqa: BLE001  a format claimed the bytes, then failed on them
        if "truncat" in str(error).lower():
            return Rejected(Reason.TRUNCATED, f"header cut short ({error})")
        return Rejected(Reason.CORRUPT, f"unreadable header: {type(error).__name__}: {error}")
    with image:
        too_many = _too_many_pixels(image, limits)
        if too_many:
            return too_many
        try:
            image.load()
        except Image.DecompressionBombError as error:  # an image nested in this one
            return _bomb(error, limits, "an image inside")
        except MemoryError:
            raise
        except Exception as error:  # noqa: BLE001
            reason = Reason.TRUNCATED if "truncat" in str(error).lower() else Reason.CORRUPT
            return Rejected(reason, f"{image.format} decode failed: {error}")
        return _too_many_pixels(image, limits) or _normalize(data, image, limits, with_signals)


def _too_many_pixels(image: Image.Image, limits: ImageLimits) -> Rejected | None:
    """The decompression-bomb guard, on the size the header (or the decoded frame) announces."""
    width, height = image.size
    if width * height > limits.max_pixels:
        return Rejected(
            Reason.TOO_MANY_PIXELS,
            f"{width}x{height} = {width * height} pixels > max_pixels {limits.max_pixels}",
        )
    return None


def _bomb(error: Image.DecompressionBombError, limits: ImageLimits, which: str) -> Rejected:
    """Pillow's guard refused the file's image or an image nested in it."""
    return Rejected(
        Reason.TOO_MANY_PIXELS,
        f"{which} has more pixels than max_pixels {limits.max_pixels} ({error})",
    )


def _normalize(
    data: bytes, image: Image.Image, limits: ImageLimits, with_signals: bool
) -> Accepted | Rejected:
    source_format = image.format
    conversions = []
    orientation = image.getexif().get(_EXIF_ORIENTATION, 1)
    if orientation not in (1, None):
        image = ImageOps.exif_transpose(image)
        conversions.append("exif_orientation")
    try:
        rgb = _to_rgb(image)
    except ValueError as error:  # Pillow has no conversion for this mode
        return Rejected(Reason.UNSUPPORTED_MODE, f"pixel mode {image.mode}: {error}")
    if rgb is None:
        return Rejected(Reason.UNSUPPORTED_MODE, f"pixel mode {image.mode} has no RGB meaning")
    if rgb is not image:
        transparency = "_transparency" if "transparency" in image.info else ""
        conversions.append(f"mode_{image.mode}{transparency}_to_rgb")
    if limits.max_side and max(rgb.size) > limits.max_side:
        rgb = ImageOps.contain(rgb, (limits.max_side, limits.max_side), Image.Resampling.LANCZOS)
        conversions.append("downscale")
    width, height = rgb.size
    signals = image_signals(rgb) if with_signals else None
    if not conversions and _is_contract_format(data, source_format):
        fmt = "jpeg" if source_format in _JPEG_FAMILY else "png"
        return Accepted(data, fmt, height, width, source_format, (), signals)
    rgb.info = {}  # only pixels travel: no chunk of the source (transparency, text) is re-encoded
    buffer = io.BytesIO()
    if source_format in _JPEG_FAMILY:
        rgb.save(buffer, format="JPEG", quality=limits.jpeg_quality)
        fmt = "jpeg"
    else:  # lossless (or unknown-loss) sources become PNG so their pixels survive exactly
        rgb.save(buffer, format="PNG", compress_level=1)
        fmt = "png"
    if source_format not in ("JPEG", "PNG"):
        conversions.append(f"format_{source_format.lower()}_to_{fmt}")
    return Accepted(
        buffer.getvalue(), fmt, height, width, source_format, tuple(conversions), signals
    )


def _is_contract_format(data: bytes, source_format: str) -> bool:
    """True when the original bytes are already an 8-bit RGB JPEG or PNG (without transparency:
    the caller composites that)."""
    if source_format in _JPEG_FAMILY:
        return True  # mode was RGB (checked by the caller); MPO's first frame is a plain JPEG
    if source_format == "PNG":
        bit_depth, color_type = data[24], data[25]  # IHDR fields at fixed offsets
        return bit_depth == 8 and color_type == 2
    return False


def _to_rgb(image: Image.Image) -> Image.Image | None:
    """Converts any pixel mode to 8-bit RGB, compositing any transparency (an alpha band, or a
    tRNS colour key in RGB, grayscale and palette images) on white; returns the input itself when
    it already is plain RGB, None for modes with no RGB meaning (floats)."""
    mode = image.mode
    if mode == "F":
        return None
    transparency = image.info.get("transparency")
    if mode == "I" or mode.startswith("I;16"):
        # 16-bit (or 32-bit int) grayscale: scale to 8 bits instead of clipping at 255.
        pixels = np.asarray(image)
        eight_bit = np.clip(np.round(pixels / 257.0), 0, 255).astype(np.uint8)
        rgb = Image.fromarray(eight_bit, mode="L").convert("RGB")
        if isinstance(transparency, int):
            alpha = Image.fromarray(np.where(pixels == transparency, 0, 255).astype(np.uint8))
            return _on_background(rgb, alpha)
        return rgb
    if transparency is not None or "A" in image.getbands() or mode in ("RGBa", "La", "PA"):
        rgba = image.convert("RGBA")
        return _on_background(rgba.convert("RGB"), rgba.getchannel("A"))
    if mode == "RGB":
        return image
    return image.convert("RGB")


def _on_background(rgb: Image.Image, alpha: Image.Image) -> Image.Image:
    background = Image.new("RGB", rgb.size, _BACKGROUND)
    background.paste(rgb, mask=alpha)
    return background
