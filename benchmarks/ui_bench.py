"""Part `ui`: the dataset page of `imgpipe ui` on a span of IMAGES real images, as a browser asks
for it: the first view (every example read from the shards and thumbnailed through the bounded
decoder, once per dataset) and then a page of 200 thumbnails (the page's HTML and its 200 JPEGs,
one request each, served from what the first view kept); the same for the page of a recorded
predictions file (`imgpipe predict --data` over the same images, recorded in the store).

Data: scikit-learn's handwritten digits (1,797 real 8x8 scans), at 32x32 px in a folder per
digit, each scan again rolled right by one pixel, then down by two, ..., until IMAGES files;
`imgpipe run` with the runlocal preset (one epoch) records them. The app is served in this
process through Flask's test client (no network), over the run's store opened read-only as
`imgpipe ui` does.

Settings (environment):
  BENCH_UI_IMAGES  images in the span (default 5000)
  BENCH_UI_ROUNDS  pages of 200 timed; the figure is their median (default 5)
"""

from __future__ import annotations

import os
import shutil
import statistics
import subprocess
import sys
import time

TITLE = "The UI's dataset and predictions pages"
IMAGES = int(os.environ.get("BENCH_UI_IMAGES", "5000"))
ROUNDS = int(os.environ.get("BENCH_UI_ROUNDS", "5"))
PAGE = 200


def _digits(folder: str) -> None:
    import numpy as np
    from PIL import Image
    from sklearn.datasets import load_digits

    digits = load_digits()
    for index in range(IMAGES):
        scan, label = (
            digits.images[index % len(digits.images)],
            digits.target[index % len(digits.images)],
        )
        shift = index // len(digits.images)  # 0: the scan, 1: right by 1 px, 2: down by 2
        pixels = np.roll(scan, shift, axis=shift % 2)
        image = Image.fromarray((pixels / 16 * 255).astype(np.uint8)).resize((32, 32))
        os.makedirs(os.path.join(folder, str(label)), exist_ok=True)
        image.convert("RGB").save(os.path.join(folder, str(label), f"{index}.png"))


def _store(workdir: str) -> str:
    """A fresh run over the digits; its store's path."""
    folder, build = os.path.join(workdir, "digits"), os.path.join(workdir, "build")
    shutil.rmtree(workdir, ignore_errors=True)
    _digits(folder)
    imgpipe = os.path.join(os.path.dirname(sys.executable), "imgpipe")
    settings = ["trainer.batch_size=32", "trainer.shuffle_buffer=320", "min_accuracy=0"]
    command = [imgpipe, "run", "--data", folder, "--build-dir", build, "--preset", "runlocal"]
    for setting in settings:
        command += ["--set", setting]
    finished = subprocess.run(command, capture_output=True, text=True, check=False)
    if finished.returncode not in (0, 3):  # pushed, or not pushed: the data is recorded either way
        raise RuntimeError(f"imgpipe run exited {finished.returncode}: {finished.stderr[-2000:]}")
    predictions = [imgpipe, "predict", "--data", folder, "--build-dir", build]
    predictions += ["--output", os.path.join(workdir, "predictions.csv")]
    finished = subprocess.run(predictions, capture_output=True, text=True, check=False)
    if finished.returncode != 0:
        raise RuntimeError(
            f"imgpipe predict exited {finished.returncode}: {finished.stderr[-2000:]}"
        )
    return os.path.join(build, "tfx", "metadata.db")


def _page_of_thumbnails(client, url: str) -> float:
    started = time.perf_counter()
    page = client.get(url)
    html = page.get_data(as_text=True)
    sources = [part.split('"', 1)[0] for part in html.split('<img src="')[1:]]
    for source in sources:
        assert client.get(source).status_code == 200
    assert len(sources) == PAGE, f"{url}: {len(sources)} thumbnails"
    return time.perf_counter() - started


def _timed(client, first_url: str, name: str) -> list[dict]:
    """The first view of a page of images (following a redirect), then ROUNDS pages of 200."""
    started = time.perf_counter()
    first = client.get(first_url, follow_redirects=True)
    first_view = time.perf_counter() - started
    assert first.status_code == 200, first_url
    base = first.request.path
    pages = [
        _page_of_thumbnails(client, f"{base}?page={1 + round_ % (IMAGES // PAGE)}")
        for round_ in range(ROUNDS)
    ]
    return [
        {"name": f"ui.{name}.first_view_s", "value": first_view, "unit": "s", "images": IMAGES},
        {
            "name": f"ui.{name}.page_of_200_s",
            "value": statistics.median(pages),
            "unit": "s",
            "images": IMAGES,
            "rounds": pages,
        },
    ]


def run(output_dir: str) -> list[dict]:
    from components.metadata_keys import PREDICTIONS_TYPE
    from pipeline.mlmd_connection import MlmdTarget
    from pipeline.ui.app import create_app

    target = MlmdTarget(sqlite=_store(os.path.join(output_dir, "ui")))
    client = create_app(target.open, target.describe()).test_client()
    [recorded] = target.open().get_artifacts_by_type(PREDICTIONS_TYPE)
    return [
        *_timed(client, "/data", "data_page"),
        *_timed(client, f"/predictions/{recorded.id}", "predictions_page"),
    ]


def chart(records: list[dict], path: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from benchmarks.charts import label_bars

    figure, axis = plt.subplots(figsize=(8, 4))
    names = [r["name"].removeprefix("ui.").replace(".", "\n") for r in records]
    bars = axis.bar(names, [r["value"] for r in records], color="#4a7ab5")
    label_bars(axis, bars, [f"{r['value']:.2f} s" for r in records])
    axis.set_ylabel("s")
    axis.tick_params(axis="x", labelsize=8)
    axis.set_title(f"imgpipe ui on {records[0]['images']:,} images: first view, a page of {PAGE}")
    figure.tight_layout()
    figure.savefig(path, dpi=100)
    plt.close(figure)


def meaning(records: list[dict]) -> list[str]:
    """Per page: its first view and a page of thumbnails."""
    by_name = {r["name"]: r for r in records}
    pages = dict.fromkeys(r["name"].split(".")[1] for r in records)
    return [
        f"On {records[0]['images']:,} images the {page.replace('_', ' ')} first shows in "
        f"{by_name[f'ui.{page}.first_view_s']['value']:.1f} s (every image read and thumbnailed "
        f"once); then a page of {PAGE} thumbnails takes "
        f"{by_name[f'ui.{page}.page_of_200_s']['value']:.2f} s."
        for page in pages
    ]
