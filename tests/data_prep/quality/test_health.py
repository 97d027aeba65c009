import io
import math

import imagehash
import numpy as np
import pytest
import skimage.data
from PIL import Image, ImageEnhance, ImageFilter

from data_prep.quality import health


def photo(name: str, size=(400, 300)) -> Image.Image:
    return Image.fromarray(getattr(skimage.data, name)()).convert("RGB").resize(size)


def reencoded(image: Image.Image, quality: int = 70) -> Image.Image:
    buffer = io.BytesIO()
    image.save(buffer, format="JPEG", quality=quality)
    return Image.open(io.BytesIO(buffer.getvalue())).convert("RGB")


def distance(a: health.ImageSignals, b: health.ImageSignals) -> int:
    return bin(a.phash ^ b.phash).count("1")


@pytest.mark.parametrize("seed", range(40))
def test_phash_equals_imagehash_on_32x32_grayscale(seed):
    rng = np.random.default_rng(seed)
    if seed % 2:
        pixels = rng.integers(0, 256, (32, 32), dtype=np.uint8)
    else:  # structured, like a photo's low frequencies
        ramp = np.linspace(0, 255, 32)[None, :] * np.linspace(0.2, 1, 32)[:, None]
        pixels = np.clip(ramp + rng.normal(0, 15, (32, 32)), 0, 255).astype(np.uint8)
    expected = int(str(imagehash.phash(Image.fromarray(pixels, "L"))), 16)
    assert health.phash(pixels) == expected


def test_copies_are_near_and_other_photos_far():
    original = photo("astronaut")
    signals = health.image_signals(original)
    copies = [
        reencoded(original, 60),
        original.resize((200, 150)),
        original.crop((8, 6, 392, 294)),
        ImageEnhance.Brightness(original).enhance(1.25),
    ]
    for copy in copies:
        assert distance(signals, health.image_signals(copy)) <= 10
    for other in ("chelsea", "coffee", "rocket"):
        assert distance(signals, health.image_signals(photo(other))) > 10


def signals_pairs(images: list[Image.Image], max_difference: float = 0.5) -> list[tuple[int, int]]:
    signals = [health.image_signals(image) for image in images]
    return health.near_duplicate_pairs(
        [s.phash for s in signals], [s.gray for s in signals], 10, max_difference
    )


def copy_as_people_make_it(image: Image.Image, scale: float, cut: tuple, brightness: float):
    """Rescaled, cropped a few pixels, brightness shifted, re-saved as a JPEG."""
    resized = image.resize(
        (round(image.width * scale), round(image.height * scale)), Image.Resampling.BICUBIC
    )
    left, top, right, bottom = cut
    cropped = resized.crop((left, top, resized.width - right, resized.height - bottom))
    return reencoded(ImageEnhance.Brightness(cropped).enhance(brightness), 75)


@pytest.mark.parametrize("name", ["astronaut", "coffee", "chelsea"])
def test_copies_of_a_photo_pair_with_it_and_other_photos_do_not(name):
    original = photo(name)
    copies = [
        reencoded(original, 60),
        original.resize((600, 450)),
        copy_as_people_make_it(original, 0.7, (3, 0, 2, 3), 1.1),
        ImageEnhance.Brightness(original).enhance(0.9),
    ]
    others = [photo(other) for other in ("rocket", "hubble_deep_field")]
    pairs = signals_pairs([original, *copies, *others])
    assert [p for p in pairs if p[0] == 0] == [(0, k) for k in range(1, 5)]
    assert not [p for p in pairs if max(p) > 4]


def test_two_crops_of_one_photo_are_distinct():
    original = Image.fromarray(skimage.data.astronaut())
    crops = [original.crop((x, 100, x + 128, 228)) for x in (0, 64, 128, 192)]
    assert signals_pairs(crops) == []


def digits_of(label: int, count: int) -> list[Image.Image]:
    """Scans of scikit-learn's digits as the health benchmark writes them: 64x64 RGB."""
    from sklearn.datasets import load_digits

    data = load_digits()
    scans = np.round(data.images[data.target == label][:count] * (255 / 16)).astype(np.uint8)
    return [
        Image.fromarray(scan).convert("RGB").resize((64, 64), Image.Resampling.BICUBIC)
        for scan in scans
    ]


def test_different_handwritten_ones_are_distinct_but_their_copies_are_found():
    ones = digits_of(1, 40)
    rng = np.random.default_rng(0)
    copies = [
        copy_as_people_make_it(
            ones[k],
            float(rng.choice([0.7, 1.3])),
            tuple(int(c) for c in rng.integers(0, 4, 4)),
            float(rng.uniform(0.9, 1.1)),
        )
        for k in range(8)
    ]
    assert signals_pairs([*ones, *copies]) == [(k, 40 + k) for k in range(8)]


def test_pairs_across_blocks_are_all_found():
    rng = np.random.default_rng(1)
    hashes = [int(h) for h in rng.integers(0, 2**62, 300, dtype=np.int64)]
    grays = [rng.integers(0, 256, health.GRAY_SIDE**2, dtype=np.uint8).tobytes() for _ in hashes]
    grays[250] = grays[3]
    found = health.near_duplicate_pairs(hashes, grays, 5, 0.5, block=64, block_pairs=64 * 300)
    assert found == [(3, 250)]


def test_clusters_are_stars_around_a_representative_never_chains():
    # 0-1-2-3-4 is a chain of pairs: 1 takes its neighbours 0 and 2, and 3 is left with 4.
    assert health.clusters(5, [(0, 1), (1, 2), (2, 3), (3, 4)]) == [[0, 1, 2], [3, 4]]
    assert health.clusters(6, [(0, 2), (2, 5), (0, 5), (3, 4)]) == [[0, 2, 5], [3, 4]]
    assert health.clusters(3, []) == []


@pytest.mark.parametrize(
    ("image", "flag"),
    [
        (Image.new("RGB", (120, 90), (10, 10, 12)), "dark"),
        (Image.new("RGB", (120, 90), (250, 250, 250)), "light"),
        (Image.new("RGB", (120, 90), (128, 100, 90)), "low_information"),
    ],
)
def test_flags_of_odd_images(image, flag):
    assert flag in health.image_signals(image).flags


def test_low_outliers_are_far_below_their_own_class():
    thin = [2.0, 2.1, 2.05, 1.95, 2.02, 2.08]
    photos = [7.0, 7.2, 6.9, 7.1, 7.05, 0.4]
    labels = ["one"] * 6 + ["photo"] * 6
    assert health.low_outliers(thin + photos, labels) == [False] * 11 + [True]


def test_blurry_and_aspect_flags():
    sharp = photo("astronaut")
    assert health.image_signals(sharp).flags == ()
    # Blur is judged at 64 pixels, as cleanvision does: a 16-pixel blur of 400 is still visible.
    assert "blurry" in health.image_signals(sharp.filter(ImageFilter.GaussianBlur(16))).flags
    assert "odd_aspect_ratio" in health.image_signals(photo("astronaut", (600, 100))).flags


@pytest.mark.parametrize("seed", range(30))
def test_percentile_below_agrees_with_numpy(seed):
    rng = np.random.default_rng(seed)
    values = rng.integers(0, 50, int(rng.integers(1, 200)), dtype=np.int32)
    for quantile in (0.0, 0.05, 0.37, 0.99, 1.0):
        percentile = float(np.percentile(values, quantile * 100))
        # Thresholds at, around and between the values, where the two neighbours straddle it.
        for threshold in (percentile, percentile + 0.25, percentile - 0.25, *range(-1, 51)):
            expected = percentile < threshold
            assert health._percentile_below(values, quantile, threshold) == expected


def test_edges_equal_pillows_find_edges():
    rng = np.random.default_rng(0)
    for height, width in ((1, 1), (2, 5), (3, 3), (47, 63), (64, 9)):
        pixels = rng.integers(0, 256, (height, width), dtype=np.uint8)
        expected = np.asarray(Image.fromarray(pixels, "L").filter(ImageFilter.FIND_EDGES))
        np.testing.assert_array_equal(health._edges(pixels), expected)


def test_odd_size_is_far_from_the_dataset():
    sizes = [(400 + 10 * i, 300 + 8 * i) for i in range(12)] + [(4000, 3000)]
    assert health.odd_size_flags(sizes) == [False] * 12 + [True]
    assert health.odd_size_flags([(64, 64)] * 9 + [(65, 64)]) == [False] * 9 + [True]
    assert health.odd_size_flags([]) == []


def test_images_without_signals_are_never_low_outliers_nor_counted():
    unmeasured = [math.inf] * 4 + [7.0, 7.2, 6.9, 0.4]
    labels = ["photo"] * 8
    assert health.low_outliers(unmeasured, labels) == [False] * 7 + [True]
    assert health.low_outliers([math.inf] * 3, ["one"] * 3) == [False] * 3
