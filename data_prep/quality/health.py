"""Data health at ingest: a perceptual signature of every accepted image, the near-duplicate
clusters of a dataset, and the odd-image flags.

Each image's signals come from the pixels validation already decoded, reduced once to a small
thumbnail, so they cost a fraction of the decode: a 64-bit DCT perceptual hash (imagehash's
phash of a 32x32 grayscale reduction), a 32x32 grayscale thumbnail, and cleanvision's checks
(dark, light, blurry, low_information; odd_aspect_ratio from the size) with cleanvision's
definitions and default thresholds, measured on the thumbnail. odd_size compares an image with
the whole dataset, so it is decided when the dataset is planned (odd_size_flags).

Near-duplicates are "the same picture": candidates come from close hashes and from each image's
most correlated thumbnails; a candidate pair is confirmed when, aligned (the better of them
zoomed in on the window that matches the other: a crop or a rescale) and standardized (a
brightness change), their thumbnails differ by less than a one-pixel shift would make them differ
(aligned_difference). Clusters are stars around a representative, never chains."""

from __future__ import annotations

import dataclasses
import itertools
import math
import operator

import numpy as np
from PIL import Image

HASH_SIDE = 32  # phash's input: 32x32 grayscale
HASH_LOW = 8  # the 8x8 lowest DCT frequencies make the 64 bits
THUMB_SIDE = 64  # cleanvision measures blur at most 64 pixels wide; the other checks reuse it
GRAY_SIDE = 32  # the stored thumbnail of the aligned comparison: 1 KiB an image
VIEW_SIDE = 16  # windows of it are compared at this size
# Below this spread (grey levels), a view is not amplified: a flat picture stays flat.
GRAY_SPREAD_FLOOR = 2.0
# The window search: every combination of these cuts (shares of a side) off the four sides,
# then the best one refined a side at a time by these steps, never beyond MAX_CUT.
ALIGN_GRID = (0.0, 0.06, 0.12)
ALIGN_STEPS = (0.03, 0.015, 0.0075)
MAX_CUT = 0.3
# A one-pixel shift costs a very smooth thumbnail almost nothing; below this the difference is
# measured in this unit instead, so noise is never divided by nearly zero.
MIN_SHIFT_COST = 1e-3
# Each image's candidates beside close hashes: its most correlated thumbnails, if at least this.
NEIGHBOURS = 5
MIN_CANDIDATE_CORRELATION = 0.8
CANDIDATE_CUT = 0.06
# cleanvision's ImagePropertyIssueManager defaults.
DARK_MAX_P99 = 0.32  # dark: the 99th percentile of pixel brightness is below this
LIGHT_MIN_P5 = 0.95  # light: the 5th percentile is above this (score 1 - p5 < 0.05)
LOW_INFORMATION_MAX_ENTROPY = 3.0  # low_information: 0.1 x entropy < 0.3
BLURRY_MAX_SCORE = 0.29
BLUR_NORMALIZING = 0.01
BLUR_COLOR_THRESHOLD = 0.18
# low_information is kept only where an image's entropy is also an outlier of its class: a
# robust z-score below -OUTLIER_Z (3.5, Iglewicz and Hoaglin's cut), the spread at least
# OUTLIER_MIN_SPREAD bits so a class of near-equal images does not flag small differences.
OUTLIER_Z = 3.5
OUTLIER_MIN_SPREAD = 0.1
ODD_ASPECT_RATIO_MIN = 0.35  # min(w/h, h/w)
ODD_SIZE_IQR_FACTOR = 3.0

FLAGS = ("dark", "light", "blurry", "low_information", "odd_aspect_ratio", "odd_size")


@dataclasses.dataclass(frozen=True)
class ImageSignals:
    """What the plan needs of one image's pixels: about 1 KiB."""

    phash: int  # 64 bits, row-major over the 8x8 low frequencies, first bit highest
    gray: bytes  # GRAY_SIDE x GRAY_SIDE grayscale, row-major
    entropy: float  # of the thumbnail's histogram, in bits: low_information's measure
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
    # box cells that straddle its pixels differently set a resized copy's thumbnail apart.
    small = gray.resize((GRAY_SIDE, GRAY_SIDE), Image.Resampling.BILINEAR).tobytes()
    dark, light = _dark_and_light(_pixels(thumb))
    entropy = thumb.entropy()
    found = {
        "dark": dark,
        "light": light,
        "blurry": _blurry(gray),
        "low_information": entropy < LOW_INFORMATION_MAX_ENTROPY,
        "odd_aspect_ratio": aspect_ratio_odd(rgb.width, rgb.height),
    }
    flags = tuple(flag for flag in FLAGS if found.get(flag))
    return ImageSignals(hashed, small, entropy, flags)


def brightness_level(signals: ImageSignals) -> int:
    """An image's mean brightness, 0 to 255: the mean grey level of its thumbnail (its area
    average, up to the reductions' rounding), rounded to a whole level. The data gate compares
    how many images have each level by the share of images that moved (brightness drift)."""
    return round(float(np.frombuffer(signals.gray, dtype=np.uint8).mean()))


def low_outliers(values: list[float], labels: list[str]) -> list[bool]:
    """Whether each value lies far below the others of its label: a robust z-score (distance
    from the label's median in scaled median absolute deviations, at least OUTLIER_MIN_SPREAD)
    below -OUTLIER_Z. So a class whose images are all plain is not called odd for it."""
    result = [False] * len(values)
    by_label: dict[str, list[int]] = {}
    for index, label in enumerate(labels):
        by_label.setdefault(label, []).append(index)
    for members in by_label.values():
        # A value that is not finite (an image without signals) is never an outlier, nor counted.
        measured = [i for i in members if math.isfinite(values[i])]
        if not measured:
            continue
        own = np.array([values[i] for i in measured], dtype=np.float64)
        median = np.median(own)
        spread = max(1.4826 * np.median(np.abs(own - median)), OUTLIER_MIN_SPREAD)
        for i, value in zip(measured, own, strict=True):
            result[i] = bool((value - median) / spread < -OUTLIER_Z)
    return result


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


def _window_matrices(low: np.ndarray, high: np.ndarray) -> np.ndarray:
    """[n, VIEW_SIDE, GRAY_SIDE] linear interpolation that stretches the window from `low` to
    `high` (shares of a side, one pair per row) over VIEW_SIDE cells."""
    cells = np.arange(VIEW_SIDE)
    span = (high - low)[:, None]
    position = (low[:, None] + span * (cells + 0.5) / VIEW_SIDE) * GRAY_SIDE - 0.5
    position = np.clip(position, 0, GRAY_SIDE - 1)
    below = np.floor(position).astype(np.int64)
    weight = (position - below).astype(np.float32)
    rows = np.arange(len(low))[:, None]
    matrices = np.zeros((len(low), VIEW_SIDE, GRAY_SIDE), dtype=np.float32)
    np.add.at(matrices, (rows, cells[None], below), 1 - weight)
    np.add.at(matrices, (rows, cells[None], np.minimum(below + 1, GRAY_SIDE - 1)), weight)
    return matrices


def _views(grays: np.ndarray, cuts: np.ndarray) -> np.ndarray:
    """[n, VIEW_SIDE**2] unit vectors of [n, GRAY_SIDE, GRAY_SIDE] thumbnails, each zoomed in on
    the window its row of `cuts` leaves (shares cut off the left, top, right and bottom), then
    standardized: a brightness or contrast change leaves the vector as it was, and a flat image
    (spread below GRAY_SPREAD_FLOOR grey levels) stays short rather than amplified noise."""
    rows = _window_matrices(cuts[:, 1], 1 - cuts[:, 3])
    columns = _window_matrices(cuts[:, 0], 1 - cuts[:, 2])
    flat = (rows @ grays @ columns.transpose(0, 2, 1)).reshape(len(grays), -1)
    flat -= flat.mean(axis=1, keepdims=True)
    spread = np.sqrt(np.einsum("nk,nk->n", flat, flat) / flat.shape[1])
    return flat / (np.maximum(spread, GRAY_SPREAD_FLOOR) * math.sqrt(flat.shape[1]))[:, None]


def _plain_views(grays: np.ndarray) -> np.ndarray:
    return _views(grays, np.zeros((len(grays), 4), dtype=np.float32))


def _best_alignment(zoomed: np.ndarray, others: np.ndarray) -> np.ndarray:
    """Per pair, the highest correlation of `others` (plain views) with a window of `zoomed`
    (thumbnails): every window of the ALIGN_GRID cuts, then the best refined one cut at a time
    by ALIGN_STEPS, so a crop of any few pixels is matched to a fraction of a pixel."""
    count = len(zoomed)
    best = np.full(count, -np.inf, dtype=np.float32)
    best_cuts = np.zeros((count, 4), dtype=np.float32)

    def consider(cuts: np.ndarray) -> None:
        score = np.einsum("nk,nk->n", _views(zoomed, cuts), others)
        better = score > best
        best[better] = score[better]
        best_cuts[better] = cuts[better]

    for cut in itertools.product(ALIGN_GRID, repeat=4):
        consider(np.tile(np.array(cut, dtype=np.float32), (count, 1)))
    for step in ALIGN_STEPS:
        for side, sign in itertools.product(range(4), (-1, 1)):
            cuts = best_cuts.copy()
            cuts[:, side] = np.clip(cuts[:, side] + sign * step, 0.0, MAX_CUT)
            consider(cuts)
    return best


def shift_correlation(grays: np.ndarray) -> np.ndarray:
    """Each thumbnail's correlation with itself moved by one of its pixels (the mean of the
    four directions): how much a misalignment of that size costs this picture. A smooth
    picture barely changes, a fine texture a lot."""
    plain = _plain_views(grays)
    shifted = []
    for side in range(4):
        cuts = np.zeros((len(grays), 4), dtype=np.float32)
        cuts[:, side] = 1 / GRAY_SIDE
        shifted.append(np.einsum("nk,nk->n", _views(grays, cuts), plain))
    return np.mean(shifted, axis=0)


def aligned_difference(
    first: np.ndarray, second: np.ndarray, shift: tuple[np.ndarray, np.ndarray]
) -> np.ndarray:
    """Per pair of [n, GRAY_SIDE, GRAY_SIDE] thumbnails: one less their correlation once the
    better of them is zoomed in on the window that matches the other best (a crop or a rescale),
    in units of what a one-pixel shift costs the smoother of the two (shift: their
    shift_correlation). A copy differs by interpolation and compression, well below one pixel's
    shift; two different handwritten 1s, smooth as they are, by more."""
    aligned = np.maximum(
        _best_alignment(first, _plain_views(second)), _best_alignment(second, _plain_views(first))
    )
    unit = np.maximum(1 - np.minimum(*shift), MIN_SHIFT_COST)
    return (1 - np.minimum(aligned, 1.0)) / unit


def _hash_candidates(hashes: list[int], max_distance: int, block_pairs: int) -> np.ndarray:
    """[pairs, 2] (i < j) whose hashes differ in at most max_distance bits, all distances
    computed in blocks of rows (block_pairs a block), vectorized."""
    count = len(hashes)
    values = np.array(hashes, dtype=np.uint64)
    blocks = [np.zeros((0, 2), dtype=np.int64)]
    rows_per_block = max(1, block_pairs // count)
    for start in range(0, count - 1, rows_per_block):
        rows = values[start : start + rows_per_block]
        distances = _popcount(rows[:, None] ^ values[None, start + 1 :])
        i, j = np.nonzero(distances <= max_distance)
        first, second = start + i, start + 1 + j
        blocks.append(np.stack([first, second], axis=1)[first < second])
    return np.concatenate(blocks)


def _neighbour_candidates(thumbs: np.ndarray, block_pairs: int) -> np.ndarray:
    """[pairs, 2] (i < j): each image with its NEIGHBOURS most correlated others, those at least
    MIN_CANDIDATE_CORRELATION, as they are or with either one's centre zoomed in by
    CANDIDATE_CUT a side: a copy cropped past what the hash tolerates still correlates with its
    original more than with most other images."""
    count = len(thumbs)
    keep = min(NEIGHBOURS, count - 1)
    plain = _plain_views(thumbs)
    centre = _views(thumbs, np.full((count, 4), CANDIDATE_CUT, dtype=np.float32))
    blocks = [np.zeros((0, 2), dtype=np.int64)]
    rows_per_block = max(1, block_pairs // count)
    for start in range(0, count, rows_per_block):
        rows = slice(start, start + rows_per_block)
        scores = np.maximum(plain[rows] @ plain.T, centre[rows] @ plain.T)
        np.maximum(scores, plain[rows] @ centre.T, out=scores)
        own = np.arange(len(scores))
        scores[own, start + own] = -np.inf
        nearest = np.argpartition(-scores, keep - 1, axis=1)[:, :keep]
        close = (np.take_along_axis(scores, nearest, axis=1) >= MIN_CANDIDATE_CORRELATION).ravel()
        first = np.repeat(start + own, keep)[close]
        second = nearest.ravel()[close]
        blocks.append(np.stack([np.minimum(first, second), np.maximum(first, second)], axis=1))
    return np.concatenate(blocks)


# Distances or correlations computed at once: each of the search's temporaries holds this many
# numbers (16 MiB), so its memory stays the same whatever the number of images.
BLOCK_PAIRS = 2**21


def near_duplicate_pairs(
    hashes: list[int],
    grays: list[bytes],
    max_distance: int,
    max_difference: float,
    block: int = 256,
    block_pairs: int = BLOCK_PAIRS,
) -> list[tuple[int, int]]:
    """Every pair (i < j) of near-duplicates: candidates by hash (within max_distance bits) or
    as close neighbours by thumbnail, each confirmed when its aligned_difference is at most
    max_difference (compared in blocks of `block` pairs, some 2 ms a pair)."""
    count = len(hashes)
    if count < 2:
        return []
    thumbs = np.frombuffer(b"".join(grays), dtype=np.uint8).reshape(count, GRAY_SIDE, GRAY_SIDE)
    thumbs = thumbs.astype(np.float32)
    candidates = np.unique(
        np.concatenate(
            [
                _hash_candidates(hashes, max_distance, block_pairs),
                _neighbour_candidates(thumbs, block_pairs),
            ]
        ),
        axis=0,
    )
    shift = shift_correlation(thumbs)
    pairs = []
    for start in range(0, len(candidates), block):
        first, second = candidates[start : start + block].T
        difference = aligned_difference(
            thumbs[first], thumbs[second], (shift[first], shift[second])
        )
        close = difference <= max_difference
        pairs += [(int(a), int(b)) for a, b in zip(first[close], second[close], strict=True)]
    return pairs


def clusters(count: int, pairs: list[tuple[int, int]]) -> list[list[int]]:
    """Star clusters of at least two members, each sorted, ordered by their first member: the
    image with the most near-duplicates left (the lowest index among equals) is a
    representative, and its near-duplicates not yet in a cluster join it. Every member is a
    near-duplicate of its representative itself; nothing joins through a chain of merely
    similar images."""
    neighbours: list[set[int]] = [set() for _ in range(count)]
    for i, j in pairs:
        neighbours[i].add(j)
        neighbours[j].add(i)
    placed = [False] * count
    groups = []
    for representative in sorted(range(count), key=lambda i: (-len(neighbours[i]), i)):
        if placed[representative]:
            continue
        members = [i for i in neighbours[representative] if not placed[i]]
        if members:
            for i in (representative, *members):
                placed[i] = True
            groups.append(sorted((representative, *members)))
    return sorted(groups, key=min)
