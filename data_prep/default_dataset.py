"""Generates the embedded default dataset: labelled shape images in class folders.

`make run-local` needs data even when the user gives none, and the pipeline must run offline, so
the default dataset is drawn here instead of downloaded. Images are deterministic per seed (same
bytes every run, so cached artifacts and fingerprints stay stable) and deliberately cluttered and
noisy, so a small CNN learns something real instead of scoring a trivial 100%.

Layout: `<output_dir>/<class_name>/<class_name>_0000.jpg`, plus `dataset_info.json`, written last,
which marks the dataset complete.
"""

from __future__ import annotations

import contextlib
import io
import json
import math
import multiprocessing
import os
import re
from collections.abc import Iterator
from concurrent.futures import ProcessPoolExecutor

import numpy as np
from PIL import Image, ImageDraw, ImageFilter

from data_prep.runtime.cores import usable_cores
from data_prep.writing.local_files import write_atomically

CLASS_NAMES = ("circle", "cross", "ring", "square", "star", "triangle")
INFO_FILE = "dataset_info.json"

# Bump whenever drawing changes, so an existing dataset from an older generator is rebuilt.
_GENERATOR_VERSION = 1
_JPEG_QUALITY = 90
_SUPERSAMPLE = 2  # shape masks are drawn at 2x and box-downsampled for anti-aliased edges
# Difficulty knobs, calibrated so that a small CNN trained briefly at 64x64 lands in the 90s
# (neither stuck nor at a trivial 100%).
_MIN_LUMA_CONTRAST = 70.0  # brightness gap between the shape and the background behind it
_LOW_CONTRAST_PROBABILITY = 0.06  # share of deliberately faint shapes
_OUTLINE_PROBABILITY = 0.35  # share of shapes outlined in a second colour
_MAX_CLUTTER = 3  # distractor lines/dots drawn both before and after the shape
_MAX_TEXTURE_AMPLITUDE = 60.0
_MAX_NOISE_SIGMA = 12.0
_BLUR_PROBABILITY = 0.2
IMAGES_PER_CLASS = 300  # what `make run-local` trains on: 1,800 images


def generate_default_dataset(
    output_dir: str,
    images_per_class: int = IMAGES_PER_CLASS,
    image_size: int = 96,
    seed: int = 0,
) -> dict[str, int]:
    """Writes the default dataset to `output_dir` and returns the image count per class.

    Returns at once, writing nothing, when `output_dir` already holds a complete dataset with the
    same parameters. Every file is written under a temporary name and renamed into place, so a
    killed run never leaves a half-written JPEG; stale `<class>_NNNN.jpg` files from a run with
    a larger `images_per_class`, and temp files from a killed run, are removed.
    """
    with drawing_default_dataset(output_dir, images_per_class, image_size, seed) as counts:
        pass
    return counts


@contextlib.contextmanager
def drawing_default_dataset(
    output_dir: str,
    images_per_class: int = IMAGES_PER_CLASS,
    image_size: int = 96,
    seed: int = 0,
) -> Iterator[dict[str, int]]:
    """generate_default_dataset, drawn while the caller's block runs: the workers are forked on
    entry and waited for on exit, where the dataset is marked complete. `imgpipe run` imports
    TensorFlow, Beam and TFX in the block, seconds of one core that leave the others free. A
    block that raises cancels the drawing, leaving the dataset incomplete (drawn again next
    time)."""
    if images_per_class < 1:
        raise ValueError(f"images_per_class must be >= 1, got {images_per_class}")
    if image_size < 32:
        raise ValueError(f"image_size must be >= 32, got {image_size}")
    if seed < 0:
        raise ValueError(f"seed must be >= 0, got {seed}")

    info = {
        "generator_version": _GENERATOR_VERSION,
        "class_names": list(CLASS_NAMES),
        "images_per_class": images_per_class,
        "image_size": image_size,
        "seed": seed,
        "counts": {name: images_per_class for name in CLASS_NAMES},
    }
    info_path = os.path.join(output_dir, INFO_FILE)
    if _is_complete(output_dir, info_path, info):
        yield dict(info["counts"])
        return

    os.makedirs(output_dir, exist_ok=True)
    if os.path.exists(info_path):
        os.remove(info_path)  # the old dataset is being replaced: not complete until we finish
    # A class per task, in forked processes, one per core: drawing is CPU-bound Python. Each image
    # is drawn from its own seed, so the bytes do not depend on the split.
    workers = min(usable_cores(), len(CLASS_NAMES))
    pool = ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("fork"))
    try:
        tasks = [
            pool.submit(_write_class, output_dir, index, images_per_class, image_size, seed)
            for index in range(len(CLASS_NAMES))
        ]
        yield dict(info["counts"])
        for task in tasks:
            task.result()
    finally:
        pool.shutdown(cancel_futures=True)
    write_atomically(info_path, (json.dumps(info, indent=2, sort_keys=True) + "\n").encode())


def _write_class(
    output_dir: str, class_index: int, images_per_class: int, image_size: int, seed: int
) -> None:
    """Draws and writes one class folder's images, then removes its stale files."""
    class_name = CLASS_NAMES[class_index]
    class_dir = os.path.join(output_dir, class_name)
    os.makedirs(class_dir, exist_ok=True)
    file_names = _file_names(class_name, images_per_class)
    for image_index, file_name in enumerate(file_names):
        rng = np.random.default_rng([seed, class_index, image_index])
        image = _render(class_name, image_size, rng)
        buffer = io.BytesIO()
        image.save(buffer, format="JPEG", quality=_JPEG_QUALITY)
        write_atomically(os.path.join(class_dir, file_name), buffer.getvalue())
    _remove_stale(class_dir, class_name, set(file_names))


def _file_names(class_name: str, count: int) -> list[str]:
    return [f"{class_name}_{index:04d}.jpg" for index in range(count)]


def _is_complete(output_dir: str, info_path: str, info: dict) -> bool:
    """True when the recorded parameters match and every expected file is present."""
    try:
        with open(info_path, encoding="utf-8") as f:
            recorded = json.load(f)
    except (OSError, ValueError):
        return False
    if recorded != info:
        return False
    return all(
        os.path.isfile(os.path.join(output_dir, name, file_name))
        for name in CLASS_NAMES
        for file_name in _file_names(name, info["images_per_class"])
    )


def _remove_stale(class_dir: str, class_name: str, expected: set[str]) -> None:
    """Removes this generator's files that the current parameters no longer produce, including
    temp files a killed run left behind (ingest would reject them as truncated images)."""
    pattern = re.compile(rf"\.?{re.escape(class_name)}_\d+\.jpg((\.[0-9a-f]{{12}})?\.tmp)?")
    for file_name in os.listdir(class_dir):
        if pattern.fullmatch(file_name) and file_name not in expected:
            os.remove(os.path.join(class_dir, file_name))


def _render(class_name: str, size: int, rng: np.random.Generator) -> Image.Image:
    """Draws one image: background, clutter, the class shape, more clutter, blur, noise."""
    canvas = Image.fromarray(_background(size, rng))
    _clutter(canvas, rng, int(rng.integers(0, _MAX_CLUTTER + 1)))

    radius = rng.uniform(0.15, 0.40) * size  # shape spans 30-80% of the image
    margin = 0.85 * radius  # lets a shape's tips clip the border slightly
    centre = (rng.uniform(margin, size - margin), rng.uniform(margin, size - margin))
    mask = _shape_mask(class_name, size, centre, radius, rng.uniform(0.0, 2 * math.pi), rng)
    inner = _erode(mask, int(rng.integers(1, 3)))
    mask_f, inner_f = _downsample(mask), _downsample(inner)

    pixels = np.asarray(canvas, dtype=np.float32)
    behind = (pixels * mask_f).sum(axis=(0, 1)) / max(float(mask_f.sum()), 1.0)
    fill = _shape_colour(behind, rng)
    outline = _random_colour(rng) if rng.random() < _OUTLINE_PROBABILITY else fill
    pixels = pixels * (1.0 - mask_f) + outline * (mask_f - inner_f) + fill * inner_f
    canvas = Image.fromarray(pixels.clip(0, 255).astype(np.uint8))
    _clutter(canvas, rng, int(rng.integers(0, _MAX_CLUTTER + 1)))

    if rng.random() < _BLUR_PROBABILITY:
        canvas = canvas.filter(ImageFilter.GaussianBlur(rng.uniform(0.4, 1.2)))
    pixels = np.asarray(canvas, dtype=np.float32)
    sigma = rng.uniform(2.0, _MAX_NOISE_SIGMA)
    pixels += sigma * rng.standard_normal(pixels.shape, dtype=np.float32)
    return Image.fromarray(pixels.clip(0, 255).astype(np.uint8))


def _random_colour(rng: np.random.Generator) -> np.ndarray:
    return rng.uniform(0.0, 255.0, 3).astype(np.float32)


def _luma(colour: np.ndarray) -> float:
    return float(colour @ np.array([0.299, 0.587, 0.114], dtype=np.float32))


def _shape_colour(behind: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """A fill whose brightness stands out from the background under the shape, except in a few
    deliberately faint images."""
    if rng.random() < _LOW_CONTRAST_PROBABILITY:
        return np.clip(behind + rng.uniform(-50.0, 50.0, 3), 0.0, 255.0).astype(np.float32)
    colour = _random_colour(rng)
    for _ in range(20):
        if abs(_luma(colour) - _luma(behind)) >= _MIN_LUMA_CONTRAST:
            break
        colour = _random_colour(rng)
    return colour


def _background(size: int, rng: np.random.Generator) -> np.ndarray:
    """A solid, linear-gradient or smooth-noise background."""
    kind = rng.integers(0, 3)
    base = _random_colour(rng)
    if kind == 0:
        pixels = np.broadcast_to(base, (size, size, 3))
    elif kind == 1:
        other = _random_colour(rng)
        angle = rng.uniform(0.0, 2 * math.pi)
        coords = np.linspace(-1.0, 1.0, size, dtype=np.float32)
        ramp = coords[None, :] * math.cos(angle) + coords[:, None] * math.sin(angle)
        t = ((ramp - ramp.min()) / (ramp.max() - ramp.min()))[..., None]
        pixels = base * (1.0 - t) + other * t
    else:
        cells = int(rng.integers(3, 7))
        coarse = rng.integers(0, 256, (cells, cells, 3), dtype=np.uint8)
        smooth = Image.fromarray(coarse).resize((size, size), Image.Resampling.BICUBIC)
        amplitude = rng.uniform(20.0, _MAX_TEXTURE_AMPLITUDE)
        pixels = base + (np.asarray(smooth, dtype=np.float32) / 127.5 - 1.0) * amplitude
    return np.clip(pixels, 0, 255).astype(np.uint8)


def _clutter(canvas: Image.Image, rng: np.random.Generator, count: int) -> None:
    """Draws short lines and dots in random colours: distractors that are not class evidence."""
    draw = ImageDraw.Draw(canvas)
    size = canvas.width
    for _ in range(count):
        colour = tuple(int(c) for c in rng.integers(0, 256, 3))
        x, y = rng.uniform(0, size, 2)
        if rng.random() < 0.5:
            length = rng.uniform(0.05, 0.25) * size
            angle = rng.uniform(0.0, 2 * math.pi)
            end = (x + length * math.cos(angle), y + length * math.sin(angle))
            draw.line([(x, y), end], fill=colour, width=int(rng.integers(1, 3)))
        else:
            r = rng.uniform(0.8, 2.5)
            draw.ellipse([x - r, y - r, x + r, y + r], fill=colour)


def _shape_mask(
    class_name: str,
    size: int,
    centre: tuple[float, float],
    radius: float,
    angle: float,
    rng: np.random.Generator,
) -> np.ndarray:
    """The class shape as a uint8 mask at supersampled resolution; rng jitters its proportions."""
    scale = _SUPERSAMPLE
    mask = Image.new("L", (size * scale, size * scale), 0)
    draw = ImageDraw.Draw(mask)
    cx, cy, r = centre[0] * scale, centre[1] * scale, radius * scale

    def polygon(points: list[tuple[float, float]]) -> list[tuple[float, float]]:
        cos, sin = math.cos(angle), math.sin(angle)
        return [(cx + r * (x * cos - y * sin), cy + r * (x * sin + y * cos)) for x, y in points]

    def ellipse(aspect: float) -> list[tuple[float, float]]:
        steps = [2 * math.pi * i / 64 for i in range(64)]
        return [(math.cos(t), aspect * math.sin(t)) for t in steps]

    if class_name == "circle":
        draw.polygon(polygon(ellipse(rng.uniform(0.9, 1.0))), fill=255)
    elif class_name == "ring":
        aspect, hole = rng.uniform(0.9, 1.0), rng.uniform(0.45, 0.7)
        draw.polygon(polygon(ellipse(aspect)), fill=255)
        draw.polygon(polygon([(x * hole, y * hole) for x, y in ellipse(aspect)]), fill=0)
    elif class_name == "square":
        half_h = math.sqrt(0.5) * rng.uniform(0.85, 1.0)
        half_w = math.sqrt(0.5)
        draw.polygon(
            polygon([(-half_w, -half_h), (half_w, -half_h), (half_w, half_h), (-half_w, half_h)]),
            fill=255,
        )
    elif class_name == "triangle":
        corners = [math.radians(90 + 120 * k + rng.uniform(-8.0, 8.0)) for k in range(3)]
        draw.polygon(polygon([(math.cos(t), math.sin(t)) for t in corners]), fill=255)
    elif class_name == "star":
        inner = rng.uniform(0.38, 0.52)
        points = []
        for k in range(10):  # alternating tips and notches
            q, t = (1.0 if k % 2 == 0 else inner), math.pi / 2 + math.pi * k / 5
            points.append((q * math.cos(t), q * math.sin(t)))
        draw.polygon(polygon(points), fill=255)
    elif class_name == "cross":
        t = rng.uniform(0.22, 0.35)
        arm = [(t, t), (1, t), (1, -t), (t, -t), (t, -1), (-t, -1)]
        arm += [(-t, -t), (-1, -t), (-1, t), (-t, t), (-t, 1), (t, 1)]
        draw.polygon(polygon(arm), fill=255)
    else:
        raise ValueError(f"unknown class_name {class_name!r}")
    return np.asarray(mask)


def _erode(mask: np.ndarray, width: int) -> np.ndarray:
    """The mask shrunk by `width` output pixels; the mask minus this is the outline."""
    reach = width * _SUPERSAMPLE
    size = mask.shape[0]
    rows = np.pad(mask, [(reach, reach), (0, 0)], mode="edge")
    eroded = rows[:size].copy()
    for i in range(1, 2 * reach + 1):
        np.minimum(eroded, rows[i : i + size], out=eroded)
    cols = np.pad(eroded, [(0, 0), (reach, reach)], mode="edge")
    for i in range(2 * reach + 1):
        np.minimum(eroded, cols[:, i : i + size], out=eroded)
    return eroded


def _downsample(mask: np.ndarray) -> np.ndarray:
    """Box-averages the supersampled mask to output resolution, as coverage in [0, 1]."""
    reduced = Image.fromarray(mask).reduce(_SUPERSAMPLE)
    return np.asarray(reduced, dtype=np.float32)[..., None] / 255.0
