"""TFRecord shards for the input-pipeline benchmarks, made by the real ingest job and reused
across runs: photo-like JPEGs (benchmarks.photo_data) and the embedded default dataset."""

from __future__ import annotations

import json
import os

from data_prep.default_dataset import generate_default_dataset
from data_prep.ingest import IngestOutputs, run_ingest
from data_prep.ingest_config import IngestConfig


def _ingested(input_dir: str, output_dir: str, config: IngestConfig, split: str = "train") -> str:
    """Ingests `input_dir` into `output_dir` unless a run with the same settings finished there;
    returns the glob of the split's shards."""
    marker = os.path.join(output_dir, "ingested.json")
    wanted = {"input": input_dir, "config": json.loads(config.to_json())}
    done = os.path.exists(marker) and json.load(open(marker)) == wanted
    if not done:
        run_ingest(config, IngestOutputs.under(output_dir))
        with open(marker, "w") as handle:
            json.dump(wanted, handle)
    return os.path.join(output_dir, f"Split-{split}", "*")


def photo_shards(workdir: str, count: int, seed: int = 1) -> str:
    """Shards (train split only) of `count` photo-like JPEGs of about 500x375; a shard glob."""
    from benchmarks.photo_data import write_photo_jpegs

    photos = write_photo_jpegs(os.path.join(workdir, "data", f"photos_{count}"), count, seed)
    config = IngestConfig(input=photos, eval_fraction=0.0)
    return _ingested(photos, os.path.join(workdir, "data", f"photo_shards_{count}"), config)


def default_dataset_shards(workdir: str) -> str:
    """The train split of the embedded default dataset, ingested with default settings."""
    return default_dataset_splits(workdir)[0]


def default_dataset_splits(workdir: str, images_per_class: int | None = None) -> tuple[str, str]:
    """(train, eval) shard globs of the embedded default dataset, ingested with default settings;
    with images_per_class, a bigger (or smaller) draw of it, in its own folders: its first
    images are the default dataset's (each image has its own seed), a later span's data."""
    name = "default_dataset" if images_per_class is None else f"default_dataset_{images_per_class}"
    images = os.path.join(workdir, "data", name)
    if images_per_class is None:
        generate_default_dataset(images)
    else:
        generate_default_dataset(images, images_per_class=images_per_class)
    config = IngestConfig(input=images)
    shards = os.path.join(workdir, "data", f"{name}_shards")
    return _ingested(images, shards, config), _ingested(images, shards, config, "eval")
