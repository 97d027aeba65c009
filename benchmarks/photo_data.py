"""Photo-like benchmark images: random crops of real photographs shipped with scikit-image.

Synthetic noise compresses and decodes unlike photos; crops of real photos give realistic JPEG
sizes and decode costs without downloading anything.
"""

from __future__ import annotations

import json
import os

import numpy as np
import skimage.data
from PIL import Image

PHOTOS = (
    "astronaut",
    "chelsea",
    "coffee",
    "hubble_deep_field",
    "immunohistochemistry",
    "retina",
    "rocket",
)
CROP = (500, 375)  # width, height
_SCALES = (1.0, 1.3, 1.7, 2.2)


def _scaled_photos() -> dict[str, list[Image.Image]]:
    """Each photo at a few scales that all cover the crop, prepared once per run."""
    scaled = {}
    for name in PHOTOS:
        photo = Image.fromarray(getattr(skimage.data, name)())
        base = max(CROP[0] / photo.width, CROP[1] / photo.height, CROP[1] / photo.width, 1.0)
        scaled[name] = [
            photo.resize(
                (round(photo.width * base * s) + 1, round(photo.height * base * s) + 1),
                Image.Resampling.BILINEAR,
            )
            for s in _SCALES
        ]
    return scaled


def write_photo_jpegs(output_dir: str, count: int, seed: int = 0) -> str:
    """Writes `count` JPEGs in class folders (class = source photo); reuses a complete set."""
    marker = os.path.join(output_dir, "photos.json")
    wanted = {"count": count, "seed": seed, "crop": CROP}
    if os.path.exists(marker):
        with open(marker) as handle:
            if json.load(handle) == wanted:
                return output_dir
    scaled = _scaled_photos()
    rng = np.random.default_rng(seed)
    for name in PHOTOS:
        os.makedirs(os.path.join(output_dir, name), exist_ok=True)
    for index in range(count):
        name = PHOTOS[index % len(PHOTOS)]
        photo = scaled[name][rng.integers(len(_SCALES))]
        width, height = CROP if rng.random() < 0.75 else CROP[::-1]
        width, height = min(width, photo.width), min(height, photo.height)
        left = rng.integers(0, photo.width - width + 1)
        top = rng.integers(0, photo.height - height + 1)
        crop = photo.crop((left, top, left + width, top + height))
        if rng.random() < 0.5:
            crop = crop.transpose(Image.Transpose.FLIP_LEFT_RIGHT)
        crop = Image.fromarray(
            np.clip(np.asarray(crop, np.float32) * rng.uniform(0.8, 1.2), 0, 255).astype(np.uint8)
        )
        path = os.path.join(output_dir, name, f"{index:06d}.jpg")
        crop.save(path, format="JPEG", quality=int(rng.integers(80, 96)))
    with open(marker, "w") as handle:
        json.dump(wanted, handle)
    return output_dir
