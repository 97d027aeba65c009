"""Data health at ingest: a perceptual signature of every accepted image, the near-duplicate
clusters of a dataset, and the odd-image flags.

Each image's signals come from the pixels validation already decoded, reduced once to a small
thumbnail, so they cost a fraction of the decode: a 64-bit DCT perceptual hash (imagehash's
phash of a 32x32 grayscale reduction), an 8x8 colour grid that tells apart pictures whose
grayscale structure agrees but whose colours or layout do not, and cleanvision's checks
(dark, light, blurry, low_information; odd_aspect_ratio from the size) with cleanvision's
definitions and default thresholds, measured on the thumbnail. odd_size compares an image with
the whole dataset, so it is decided when the dataset is planned (odd_size_flags).

Two images are near-duplicates when their hashes differ in at most `max_distance` bits and their
colour grids agree once each channel is standardized (so a brightness shift still matches), as
they are or with one of them zoomed in on a window a crop of a few percent keeps; clusters are
the connected groups of such pairs.
"""

from __future__ import annotations

import dataclasses
import functools
import itertools
import math
import operator

import numpy as np
from PIL import Image

HASH_SIDE = 32  # phash's input: 32x32 grayscale
HASH_LOW = 8  # the 8x8 lowest DCT frequencies make the 64 bits
THUMB_SIDE = 64  # cleanvision measures blur at most 64 pixels wide; the other checks reuse it
GRID_SIDE = 8
# Two colour grids, each channel standardized (its mean out, divided by its spread plus
# GRID_SPREAD_FLOOR so flat images stay flat), differ by at most this mean absolute value in a
# near-duplicate pair, once the better of them is zoomed in as a crop would have (CROP_SCALES):
# re-encoded and resized copies differ by about 0.01 to 0.05, brightened (clipped) and cropped
# ones by up to 0.07, distinct scans of the same digit that share a hash mostly by 0.09 to 0.17.
GRID_MAX_DIFFERENCE = 0.08
GRID_SPREAD_FLOOR = 8.0
# The share of each side a crop may keep: each grid is also compared zoomed in on the windows
# of these sizes at the corners, the middles of the edges and the centre.
CROP_SCALES = (0.95, 0.9)
# cleanvision's ImagePropertyIssueManager defaults.
DARK_MAX_P99 = 0.32  # dark: the 99th percentile of pixel brightness is below this
LIGHT_MIN_P5 = 0.95  # light: the 5th percentile is above this (score 1 - p5 < 0.05)
LOW_INFORMATION_MAX_ENTROPY = 3.0  # low_information: 0.1 x entropy < 0.3
BLURRY_MAX_SCORE = 0.29
BLUR_NORMALIZING = 0.01
BLUR_COLOR_THRESHOLD = 0.18
ODD_ASPECT_RATIO_MIN = 0.35  # min(w/h, h/w)
ODD_SIZE_IQR_FACTOR = 3.0

FLAGS = ("dark", "light", "blurry", "low_information", "odd_aspect_ratio", "odd_size")


@dataclasses.dataclass(frozen=True)
class ImageSignals:
    """What the plan needs of one image's pixels: some 200 bytes."""

    phash: int  # 64 bits, row-major over the 8x8 low frequencies, first bit highest
    grid: bytes  # 8x8 RGB, row-major
    flags: tuple[str, ...]  # FLAGS found in the image alone (odd_size needs the dataset)


def _dct_basis() -> np.ndarray:
    """The rows of the unnormalized DCT-II (scipy.fftpack.dct's) for the lowest frequencies."""
    k = np.arange(HASH_LOW)[:, None]
    n = np.arange(HASH_SIDE)[None, :]
    return 2.0 * np.cos(np.pi * k * (2 * n + 1) / (2 * HASH_SIDE))


_DCT_LOW = _dct_basis()


def phash(gray: np.ndarray) -> int:
    """imagehash.phash of a 32x32 grayscale image, as an int: the 8x8 lowest frequencies of its
    2-D DCT, each bit set where the coefficient is above their median."""
    # einsum rather than a matrix product: numpy's own loop, never BLAS (see
    # _BRIGHTNESS_WEIGHTS).
    rows = np.einsum("kn,nm->km", _DCT_LOW, gray.astype(np.float64))
    low = np.einsum("km,jm->kj", rows, _DCT_LOW).ravel()
    middle = np.partition(low, (31, 32))
    bits = low > (middle[31] + middle[32]) / 2
    return int.from_bytes(np.packbits(bits).tobytes(), "big")


def _percentile_below(values: np.ndarray, quantile: float, threshold: float) -> bool:
    """Whether numpy's default (linear) percentile of the values is below threshold, from one
    count: the two values around the percentile's position are read only when they straddle
    the threshold."""
    position = quantile * (values.size - 1)
    low, high = math.floor(position), math.ceil(position)
    below = int(np.count_nonzero(values < threshold))
    if below > high:
        return True
    if below <= low:
        return False
    under, over = values[values < threshold].max(), values[values >= threshold].min()
    return under + (over - under) * (position - low) < threshold


def _pixels(image: Image.Image) -> np.ndarray:
    """The image's bytes as uint8 [height, width(, bands)], without numpy's array protocol."""
    bands = len(image.getbands())
    shape = (image.height, image.width, bands) if bands > 1 else (image.height, image.width)
    return np.frombuffer(image.tobytes(), dtype=np.uint8).reshape(shape)


def _dark_and_light(pixels: np.ndarray) -> tuple[bool, bool]:
    """cleanvision's dark and light flags: percentiles of perceived brightness,
    sqrt(0.241 R^2 + 0.691 G^2 + 0.068 B^2) / 255, against their thresholds, compared on the
    integer weighted squares (x 1000), whose order the root keeps."""
    weighted = pixels.reshape(-1, 3).astype(np.int32) ** 2 @ _BRIGHTNESS_WEIGHTS
    dark = _percentile_below(weighted, 0.99, (DARK_MAX_P99 * 255) ** 2 * 1000)
    light = not _percentile_below(weighted, 0.05, (LIGHT_MIN_P5 * 255) ** 2 * 1000)
    return dark, light


# Integers, so the product is numpy's own loop, never BLAS: a float product over the pixels
# wakes OpenBLAS's threads in the forked decoder, which then spin (measured: some 0.45 ms of
# CPU per photo, none of it in the calling thread).
_BRIGHTNESS_WEIGHTS = np.array([241, 691, 68], dtype=np.int32)


def _variance(values: np.ndarray) -> float:
    """Variance of integer values, from exact integer sums (einsum: numpy's loop, not BLAS)."""
    flat = values.ravel().astype(np.int64)
    mean = int(flat.sum()) / flat.size
    return int(np.einsum("i,i", flat, flat)) / flat.size - mean * mean


def _count_spread(histogram: list[int], total: int) -> float:
    """Standard deviation of a histogram's counts (total of them), in plain Python: numpy's
    per-call cost outweighs 256 bins."""
    count_mean = total / len(histogram)
    count_variance = sum(map(operator.mul, histogram, histogram)) / len(histogram) - count_mean**2
    return math.sqrt(max(count_variance, 0.0))


def _edges(gray: np.ndarray) -> np.ndarray:
    """Pillow's ImageFilter.FIND_EDGES of uint8 pixels, exactly (8 x a pixel less its eight
    neighbours, clipped to 0..255, the border kept), in a few array sums: the filter's own
    call costs more than twice as much on a thumbnail."""
    pixels = gray.astype(np.int16)
    rows = pixels[:, :-2] + pixels[:, 1:-1] + pixels[:, 2:]
    block = rows[:-2] + rows[1:-1] + rows[2:]  # each inner pixel's 3x3 sum
    pixels[1:-1, 1:-1] = np.clip(9 * pixels[1:-1, 1:-1] - block, 0, 255)
    return pixels


def _blurry(gray: Image.Image) -> bool:
    """cleanvision's blurry score: edge strength, plus the grayscale histogram's spread for
    images whose spread is large (so flat but colourful images are not called blurry)."""
    edge_variance = _variance(_edges(_pixels(gray)))
    histogram_spread = _count_spread(gray.histogram(), gray.width * gray.height)
    blur = 1 - math.exp(-math.sqrt(max(edge_variance, 0.0)) * BLUR_NORMALIZING)
    spread = 1 - math.exp(-histogram_spread * BLUR_NORMALIZING)
    if spread <= BLUR_COLOR_THRESHOLD:
        spread = 0.0
    return min(blur + spread, 1.0) < BLURRY_MAX_SCORE


def aspect_ratio_odd(width: int, height: int) -> bool:
    return min(width / height, height / width) < ODD_ASPECT_RATIO_MIN


def thumbnail(rgb: Image.Image) -> Image.Image:
    """At most THUMB_SIDE pixels on the longer side, by an integer box reduction: one pass over
    the decoded pixels, anti-aliased."""
    factor = -(-max(rgb.size) // THUMB_SIDE)
    return rgb.reduce(factor) if factor > 1 else rgb


def image_signals(rgb: Image.Image) -> ImageSignals:
    """The signals of one decoded RGB image."""
    thumb = thumbnail(rgb)
    gray = thumb.convert("L")
    hashed = phash(_pixels(gray.resize((HASH_SIDE, HASH_SIDE), Image.Resampling.BOX)))
    # Bilinear (antialiased) rather than box: the thumbnail's size varies with the image's, and
    # box cells that straddle its pixels differently set a resized copy's grid apart.
    grid = thumb.resize((GRID_SIDE, GRID_SIDE), Image.Resampling.BILINEAR).tobytes()
    dark, light = _dark_and_light(_pixels(thumb))
    found = {
        "dark": dark,
        "light": light,
        "blurry": _blurry(gray),
        "low_information": thumb.entropy() < LOW_INFORMATION_MAX_ENTROPY,
        "odd_aspect_ratio": aspect_ratio_odd(rgb.width, rgb.height),
    }
    return ImageSignals(hashed, grid, tuple(flag for flag in FLAGS if found.get(flag)))


def odd_size_flags(sizes: list[tuple[int, int]]) -> list[bool]:
    """cleanvision's odd_size over a dataset's (width, height): sqrt(area) beyond
    ODD_SIZE_IQR_FACTOR interquartile ranges outside the quartiles."""
    if not sizes:
        return []
    side = np.sqrt(np.array([w * h for w, h in sizes], dtype=np.float64))
    q1, q3 = np.percentile(side, [25, 75])
    low, high = q1 - ODD_SIZE_IQR_FACTOR * (q3 - q1), q3 + ODD_SIZE_IQR_FACTOR * (q3 - q1)
    middle, gap = (low + high) / 2, high - low
    if gap == 0:  # most images share one size: cleanvision calls any other size odd
        return (side != middle).tolist()
    return (np.abs(side - middle) / gap > 0.5).tolist()


_POPCOUNT_MASKS = tuple(
    np.uint64(mask)
    for mask in (0x5555555555555555, 0x3333333333333333, 0x0F0F0F0F0F0F0F0F, 0x0101010101010101)
)


def _popcount(values: np.ndarray) -> np.ndarray:
    """Set bits of each uint64 (numpy 1.x has no bitwise_count), in place on two arrays: the
    search calls it on blocks of millions of hash pairs, where each temporary costs."""
    ones, twos, fours, bytes_sum = _POPCOUNT_MASKS
    spare = values >> np.uint64(1)
    spare &= ones
    counts = values - spare
    np.right_shift(counts, np.uint64(2), out=spare)
    spare &= twos
    counts &= twos
    counts += spare
    np.right_shift(counts, np.uint64(4), out=spare)
    counts += spare
    counts &= fours
    counts *= bytes_sum
    counts >>= np.uint64(56)
    return counts


def _standardized(grids: np.ndarray) -> np.ndarray:
    """[..., side, side] grids as [..., side * side], each standardized: a brightness or
    contrast change of the whole picture leaves its channels alike."""
    flat = grids.reshape(*grids.shape[:-2], -1)
    mean = flat.mean(axis=-1)
    variance = np.einsum("...k,...k->...", flat, flat) / flat.shape[-1] - mean * mean
    scale = 1 / (np.sqrt(np.maximum(variance, 0)) + GRID_SPREAD_FLOOR)
    return (flat - mean[..., None]) * scale[..., None]


def _window_matrix(scale: float, offset: float) -> np.ndarray:
    """[GRID_SIDE, GRID_SIDE] linear interpolation that stretches the window of a side starting
    at `offset` and `scale` long (both shares of the side) over the whole side."""
    cells = np.arange(GRID_SIDE)
    position = np.clip(offset * GRID_SIDE + scale * (cells + 0.5) - 0.5, 0, GRID_SIDE - 1)
    low = np.floor(position).astype(np.int64)
    weight = (position - low).astype(np.float32)
    matrix = np.zeros((GRID_SIDE, GRID_SIDE), dtype=np.float32)
    np.add.at(matrix, (cells, low), 1 - weight)
    np.add.at(matrix, (cells, np.minimum(low + 1, GRID_SIDE - 1)), weight)
    return matrix


@functools.cache
def _crop_windows() -> tuple[tuple[np.ndarray, np.ndarray], ...]:
    """(rows, columns) interpolation matrices of every window CROP_SCALES names."""
    windows = []
    for scale in CROP_SCALES:
        offsets = (0.0, (1 - scale) / 2, 1 - scale)
        for top, left in itertools.product(offsets, offsets):
            windows.append((_window_matrix(scale, top), _window_matrix(scale, left)))
    return tuple(windows)


def _grids_alike(first: np.ndarray, second: np.ndarray) -> np.ndarray:
    """Whether each pair of [pairs, 3, side, side] colour grids, each channel standardized,
    differs by at most GRID_MAX_DIFFERENCE on average, as they are or with either one zoomed in
    on a crop window (a crop of the other shows what the window does). A pair found alike is
    not compared again."""
    plain = _standardized(first), _standardized(second)
    alike = np.abs(plain[0] - plain[1]).mean(axis=(1, 2)) <= GRID_MAX_DIFFERENCE
    left = np.nonzero(~alike)[0]
    for rows, columns in _crop_windows():
        if not left.size:
            break
        for zoomed, other in ((first[left], plain[1][left]), (second[left], plain[0][left])):
            difference = _standardized(rows @ zoomed @ columns.T)
            difference -= other
            found = np.abs(difference, out=difference).mean(axis=(1, 2)) <= GRID_MAX_DIFFERENCE
            alike[left[found]] = True
        left = left[~alike[left]]
    return alike


# Hash distances computed at once: each of the search's temporaries holds this many uint64s
# (16 MiB), so its memory stays the same whatever the number of images.
HASH_BLOCK_PAIRS = 2**21


def near_duplicate_pairs(
    hashes: list[int],
    grids: list[bytes],
    max_distance: int,
    block: int = 256,
    hash_block_pairs: int = HASH_BLOCK_PAIRS,
) -> list[tuple[int, int]]:
    """Every pair (i < j) of near-duplicates: hashes within max_distance bits, then grids alike
    (_grids_alike). All hash distances in blocks of rows (hash_block_pairs distances a block),
    vectorized (a few seconds at 20,000 images), the grids compared in blocks of `block` pairs
    only for the pairs the hashes leave (some 0.1 ms each): exact."""
    count = len(hashes)
    if count < 2:
        return []
    values = np.array(hashes, dtype=np.uint64)
    blocks = []
    rows_per_block = max(1, hash_block_pairs // count)
    for start in range(0, count - 1, rows_per_block):
        rows = values[start : start + rows_per_block]
        distances = _popcount(rows[:, None] ^ values[None, start + 1 :])
        i, j = np.nonzero(distances <= max_distance)
        first, second = start + i, start + 1 + j
        blocks.append(np.stack([first, second], axis=1)[first < second])
    candidates = np.concatenate(blocks)
    colours = np.frombuffer(b"".join(grids), dtype=np.uint8).reshape(count, GRID_SIDE, GRID_SIDE, 3)
    pairs = []
    for start in range(0, len(candidates), block):
        index = candidates[start : start + block]
        first, second = (  # contiguous, so that matmul's stacks go to BLAS
            np.ascontiguousarray(colours[index[:, k]].transpose(0, 3, 1, 2), dtype=np.float32)
            for k in (0, 1)
        )
        pairs += [(int(a), int(b)) for a, b in index[_grids_alike(first, second)]]
    return pairs


def clusters(count: int, pairs: list[tuple[int, int]]) -> list[list[int]]:
    """Connected groups (union-find) of at least two members, each sorted, ordered by their
    first member."""
    parent = list(range(count))

    def root(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    for i, j in pairs:
        a, b = root(i), root(j)
        if a != b:
            parent[max(a, b)] = min(a, b)
    groups: dict[int, list[int]] = {}
    for i in range(count):
        groups.setdefault(root(i), []).append(i)
    return sorted((members for members in groups.values() if len(members) > 1), key=min)
