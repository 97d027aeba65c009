import io
import struct
import zlib

import numpy as np
import pytest
import tensorflow as tf
from PIL import Image

from data_prep.reading.image_validation import (
    Accepted,
    ImageLimits,
    Reason,
    Rejected,
    identify_format,
    validate_bounded,
    validate_image,
)
from tests.data_prep import image_files

LIMITS = ImageLimits()


def decode(accepted: Accepted) -> np.ndarray:
    """Decodes exactly as the trainer will."""
    image = tf.io.decode_image(accepted.encoded, channels=3, expand_animations=False)
    return image.numpy()


def test_rgb_jpeg_keeps_original_bytes():
    data = image_files.jpeg()
    result = validate_image(data, LIMITS)
    assert isinstance(result, Accepted)
    assert result.encoded == data
    assert (result.image_format, result.height, result.width) == ("jpeg", 24, 32)
    assert result.conversions == ()


def test_rgb_png_keeps_original_bytes_and_exact_pixels():
    data = image_files.png()
    result = validate_image(data, LIMITS)
    assert result.encoded == data
    np.testing.assert_array_equal(decode(result), image_files.random_rgb())


@pytest.mark.parametrize("fmt", ["WEBP", "TIFF", "BMP"])
def test_formats_tensorflow_cannot_read_become_lossless_png(fmt):
    pixels = image_files.random_rgb()
    options = {"lossless": True} if fmt == "WEBP" else {}
    result = validate_image(image_files.encode(Image.fromarray(pixels), fmt, **options), LIMITS)
    assert result.image_format == "png"
    assert result.source_format == fmt
    assert f"format_{fmt.lower()}_to_png" in result.conversions
    np.testing.assert_array_equal(decode(result), pixels)


def test_gif_palette_becomes_rgb_png():
    palette = Image.fromarray(image_files.random_rgb()).convert("P")
    result = validate_image(image_files.encode(palette, "GIF"), LIMITS)
    assert result.image_format == "png"
    np.testing.assert_array_equal(decode(result), np.asarray(palette.convert("RGB")))


def test_grayscale_becomes_three_equal_channels():
    gray = Image.fromarray(image_files.random_rgb()[..., 0])
    result = validate_image(image_files.encode(gray, "PNG"), LIMITS)
    pixels = decode(result)
    assert pixels.shape == (24, 32, 3)
    np.testing.assert_array_equal(pixels[..., 0], np.asarray(gray))
    np.testing.assert_array_equal(pixels[..., 1], pixels[..., 2])


def test_rgba_is_composited_on_white():
    rgba = np.zeros((4, 4, 4), dtype=np.uint8)
    rgba[..., 0] = 255  # red, fully transparent except the first pixel
    rgba[0, 0, 3] = 255
    result = validate_image(image_files.encode(Image.fromarray(rgba, "RGBA"), "PNG"), LIMITS)
    pixels = decode(result)
    assert tuple(pixels[0, 0]) == (255, 0, 0)
    assert tuple(pixels[3, 3]) == (255, 255, 255)


def test_sixteen_bit_grayscale_is_scaled_not_clipped():
    values = np.array([[0, 257 * 100, 65535]], dtype=np.uint16)
    result = validate_image(image_files.encode(Image.fromarray(values), "PNG"), LIMITS)
    assert decode(result)[0, :, 0].tolist() == [0, 100, 255]


def test_cmyk_jpeg_is_reencoded_as_rgb_jpeg():
    cmyk = Image.fromarray(image_files.random_rgb()).convert("CMYK")
    result = validate_image(image_files.encode(cmyk, "JPEG"), LIMITS)
    assert result.image_format == "jpeg"
    assert "mode_CMYK_to_rgb" in result.conversions
    assert decode(result).shape == (24, 32, 3)


def test_exif_orientation_is_applied():
    data, upright = image_files.exif_rotated_jpeg()
    result = validate_image(data, LIMITS)
    assert "exif_orientation" in result.conversions
    pixels = decode(result).astype(int)
    assert pixels.shape == upright.shape
    assert np.abs(pixels - upright).mean() < 8  # JPEG noise only; a wrong rotation is ~100


def test_downscale_to_max_side_keeps_aspect_ratio():
    result = validate_image(image_files.jpeg(height=60, width=120), ImageLimits(max_side=40))
    assert (result.width, result.height) == (40, 20)
    assert "downscale" in result.conversions


@pytest.mark.parametrize(
    ("data", "reason"),
    [
        (b"", Reason.EMPTY),
        (b"just some text, not pixels", Reason.NOT_AN_IMAGE),
        (image_files.jpeg(height=64, width=64)[:-200], Reason.TRUNCATED),
        (image_files.jpeg()[:40], Reason.TRUNCATED),
    ],
)
def test_bad_bytes_are_rejected_with_reason(data, reason):
    result = validate_image(data, LIMITS)
    assert isinstance(result, Rejected)
    assert result.reason == reason


def test_corrupt_png_is_rejected():
    data = bytearray(image_files.png(height=64, width=64))
    idat = data.index(b"IDAT")
    data[idat + 20 : idat + 60] = bytes(40)  # scrambles the compressed pixel stream
    assert validate_image(bytes(data), LIMITS).reason in (Reason.CORRUPT, Reason.TRUNCATED)


def _chunk(kind: bytes, payload: bytes) -> bytes:
    return (
        struct.pack(">I", len(payload))
        + kind
        + payload
        + struct.pack(">I", zlib.crc32(kind + payload))
    )


def _png_bomb(width: int, height: int) -> bytes:
    """A small file whose header announces a huge image (and holds far too little pixel data)."""
    ihdr = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    pixels = zlib.compress(bytes(4096))
    return (
        b"\x89PNG\r\n\x1a\n"
        + _chunk(b"IHDR", ihdr)
        + _chunk(b"IDAT", pixels)
        + _chunk(b"IEND", b"")
    )


@pytest.mark.parametrize("side", [5_000, 100_000])
def test_decompression_bomb_is_refused_from_the_header_before_decoding(side):
    # Were the decoder reached, this file would be rejected as 'truncated' instead.
    result = validate_image(_png_bomb(side, side), ImageLimits(max_pixels=1_000_000))
    assert result.reason == Reason.TOO_MANY_PIXELS
    assert str(side) in result.detail


def test_header_within_limits_reaches_the_decoder():
    assert validate_image(_png_bomb(500, 500), LIMITS).reason == Reason.TRUNCATED


def test_too_large_file_is_refused():
    result = validate_image(image_files.jpeg(), ImageLimits(max_file_bytes=100))
    assert result.reason == Reason.FILE_TOO_LARGE


def test_format_is_identified_from_bytes_not_names():
    assert identify_format(image_files.png()) == "PNG"
    assert identify_format(image_files.jpeg()) == "JPEG"
    assert identify_format(b"%PDF-1.4") is None


def test_float_images_are_rejected_as_unsupported_mode():
    floats = Image.fromarray(np.linspace(0, 1, 16, dtype=np.float32).reshape(4, 4), "F")
    result = validate_image(image_files.encode(floats, "TIFF"), LIMITS)
    assert result.reason == Reason.UNSUPPORTED_MODE


def test_every_accepted_output_decodes_with_tf_into_three_channels():
    buffer = io.BytesIO()
    Image.fromarray(image_files.random_rgb()).convert("LA").save(buffer, format="PNG")
    for data in (image_files.jpeg(), image_files.png(), buffer.getvalue()):
        assert decode(validate_image(data, LIMITS)).shape == (24, 32, 3)


@pytest.mark.parametrize(
    ("data", "reason"),
    [
        (b"\x00\x00\x00\x18ftypheic\x00\x00\x00\x00mif1heic", Reason.UNSUPPORTED_FORMAT),
        (b"II*\x00\x08\x00\x00\x00garbage", Reason.CORRUPT),
    ],
)
def test_image_signature_we_cannot_decode_is_a_broken_image_not_a_non_image(data, reason):
    # No HEIC decoder is installed; a TIFF header Pillow cannot parse is a corrupt TIFF.
    assert validate_image(data, LIMITS).reason == reason


@pytest.mark.parametrize(
    ("mode", "transparency"),
    [("RGB", (255, 0, 0)), ("L", 76), ("P", None)],  # L: red's gray level; P: red's index
)
def test_png_transparency_chunk_is_composited_on_white(mode, transparency):
    pixels = np.zeros((4, 4, 3), dtype=np.uint8)
    pixels[..., 0] = 255  # red everywhere but the first pixel, which is black
    pixels[0, 0] = 0
    image = Image.fromarray(pixels).convert(mode)
    if mode == "P":
        transparency = image.getpixel((1, 1))
    data = image_files.encode(image, "PNG", transparency=transparency)
    result = validate_image(data, LIMITS)
    assert isinstance(result, Accepted), result
    decoded = decode(result)
    assert tuple(decoded[3, 3]) == (255, 255, 255)  # the transparent red became the background
    assert tuple(decoded[0, 0]) == (0, 0, 0)


@pytest.mark.parametrize("fmt", ["TGA", "PCX", "SGI", "QOI", "DDS", "ICO", "IM"])
def test_formats_without_a_common_extension_are_decoded_from_their_bytes(fmt):
    pixels = image_files.random_rgb(height=16, width=16)
    result = validate_image(image_files.encode(Image.fromarray(pixels), fmt), LIMITS)
    assert isinstance(result, Accepted), result
    assert result.source_format == fmt
    assert decode(result).shape == (16, 16, 3)


def test_decompression_bomb_message_names_the_configured_limit():
    result = validate_image(_png_bomb(30_000, 30_000), ImageLimits(max_pixels=5_000_000))
    assert result.reason == Reason.TOO_MANY_PIXELS
    assert "max_pixels 5000000" in result.detail  # not Pillow's own limit


def _icns_holding(png: bytes) -> bytes:
    """An Apple icon whose 256x256 slot holds `png`, whatever size that declares."""
    block = b"ic08" + struct.pack(">I", 8 + len(png)) + png
    return b"icns" + struct.pack(">I", 8 + len(block)) + block


@pytest.mark.parametrize("max_pixels", [1_000_000, ImageLimits.max_pixels])
def test_an_image_nested_in_a_container_is_held_to_the_same_pixel_limit(max_pixels):
    """The icon itself declares 256x256; Pillow's guard, set from max_pixels, sees the 10^10
    pixels of the image inside before any is decoded."""
    icon = _icns_holding(_png_bomb(100_000, 100_000))
    with Image.open(io.BytesIO(icon)) as outer:
        assert outer.size == (256, 256)
    result = validate_image(icon, ImageLimits(max_pixels=max_pixels))
    assert result.reason == Reason.TOO_MANY_PIXELS
    assert f"max_pixels {max_pixels}" in result.detail


def test_pillow_s_guard_and_ours_agree_on_the_outer_image():
    """Pillow refuses above twice its setting, so it is set to half of max_pixels: a header
    just within the limit reaches the decoder, one just over it is refused."""
    limits = ImageLimits(max_pixels=1000 * 1000)
    assert validate_image(_png_bomb(1000, 1000), limits).reason == Reason.TRUNCATED
    assert validate_image(_png_bomb(1000, 1001), limits).reason == Reason.TOO_MANY_PIXELS


def test_a_bounded_validation_gives_the_same_answer_from_a_child():
    data = image_files.encode(Image.fromarray(image_files.random_rgb(seed=3)), "WEBP")
    assert validate_bounded(data, LIMITS) == validate_image(data, LIMITS)
    refused = validate_bounded(_png_bomb(30_000, 30_000), ImageLimits(max_pixels=5_000_000))
    assert refused == validate_image(_png_bomb(30_000, 30_000), ImageLimits(max_pixels=5_000_000))


def test_a_decode_over_the_memory_bound_is_rejected_naming_it():
    """A BMP header within max_pixels whose pixels need 1 GB: Pillow allocates them in C."""
    side = 16_000
    header = struct.pack("<2sIHHI", b"BM", 54, 0, 0, 54)
    info = struct.pack("<IiiHHIIiiII", 40, side, side, 1, 24, 0, 0, 0, 0, 0, 0)
    limits = ImageLimits(max_pixels=side * side, decoder_memory_bytes=256 * 1024 * 1024)
    result = validate_bounded(header + info + bytes(1024), limits)
    assert result.reason == Reason.DECODER_MEMORY
    assert f"decoder_memory_bytes {256 * 1024 * 1024}" in result.detail


def test_too_large_file_message_names_the_configured_limit():
    result = validate_image(image_files.png(), ImageLimits(max_file_bytes=100))
    assert result.reason == Reason.FILE_TOO_LARGE
    assert "max_file_bytes 100" in result.detail


def test_an_exception_from_pillow_becomes_a_rejection_naming_it(monkeypatch):
    data = image_files.encode(Image.fromarray(image_files.random_rgb()), "BMP")

    def explode(*args, **kwargs):
        raise ValueError("transparency for RGB must be list or tuple")

    monkeypatch.setattr(Image.Image, "save", explode)  # where the reported crash came from
    result = validate_image(data, LIMITS)
    assert result.reason == Reason.DECODE_FAILED
    assert result.detail == "ValueError: transparency for RGB must be list or tuple"


def test_what_libtiff_prints_is_the_detail_and_never_reaches_stderr(capfd):
    data = bytearray(
        image_files.encode(
            Image.fromarray(image_files.random_rgb(64, 64)),
            "TIFF",
            compression="tiff_adobe_deflate",
        )
    )
    for position in range(20, len(data) // 2, 37):
        data[position] ^= 0xFF
    result = validate_image(bytes(data), LIMITS)
    assert result.reason == Reason.CORRUPT
    assert "decoder said: ZIPDecode" in result.detail
    assert capfd.readouterr().err == ""
