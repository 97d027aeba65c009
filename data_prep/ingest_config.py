"""Ingest settings, checked before any work starts."""

from __future__ import annotations

import dataclasses
import json

from data_prep.contract.config_error import ConfigError
from data_prep.reading.image_validation import ImageLimits

# Below this, decoding an ordinary photo fails too.
_MIN_DECODER_MEMORY = 64 * 1024 * 1024


@dataclasses.dataclass(frozen=True)
class IngestConfig:
    """How raw images become a dataset.

    Attributes:
      input: a folder of class folders, or a .csv/.jsonl manifest (local path or any Beam URI).
      eval_fraction: share of images hashed into the eval split (manifest splits take precedence).
      test_fraction: share hashed into an optional test split; 0 means no test split. The
        test split is scored beside the eval split and shown, never used for a decision.
      target_shard_bytes: shards are balanced so none is much above this size.
      min_shards: each split gets at least this many shards while they stay above 4 MiB, so
        writers and the trainer's parallel readers have files to share even in small datasets.
      max_reject_fraction: the run fails when more than this share of the image files found are
        rejected for a defect (duplicates are reported but do not count).
      files_per_bundle: files handled per Beam element; large enough to amortize Beam's per-element
        cost, small enough to spread over every worker.
      near_duplicate_max_distance: images whose 64-bit perceptual hashes differ in at most this
        many bits are compared as candidate near-duplicates (beside each image's most alike
        thumbnails); 0 asks for equal hashes.
      near_duplicate_max_difference: a candidate pair is a near-duplicate (the same picture:
        clustered, reported, kept on one side of the split) when, aligned and standardized,
        their thumbnails differ by at most this share of what a one-pixel shift changes;
        copies (rescaled, cropped, re-encoded, brightened) measure below 0.5, distinct
        handwritten digits above (docs/data-health.md). 0 asks for equal thumbnails.
      limits: per-image checks and encoding choices.
    """

    input: str
    eval_fraction: float = 0.2
    test_fraction: float = 0.0
    target_shard_bytes: int = 100 * 1024 * 1024
    min_shards: int = 8
    max_reject_fraction: float = 0.1
    files_per_bundle: int = 64
    near_duplicate_max_distance: int = 10
    near_duplicate_max_difference: float = 0.5
    limits: ImageLimits = ImageLimits()

    def validate(self) -> IngestConfig:
        if not self.input:
            raise ConfigError("input", "is empty; give a folder of class folders or a manifest")
        for name in ("eval_fraction", "test_fraction", "max_reject_fraction"):
            value = getattr(self, name)
            if not 0.0 <= value <= 1.0:
                raise ConfigError(name, f"{value} is not between 0 and 1")
        if self.eval_fraction + self.test_fraction >= 1.0:
            raise ConfigError(
                "eval_fraction",
                f"eval_fraction + test_fraction = {self.eval_fraction + self.test_fraction} "
                "leaves nothing to train on",
            )
        if self.target_shard_bytes < 1024 * 1024:
            raise ConfigError("target_shard_bytes", f"{self.target_shard_bytes} is below 1 MiB")
        if self.min_shards < 1:
            raise ConfigError("min_shards", f"{self.min_shards} is below 1")
        if self.files_per_bundle < 1:
            raise ConfigError("files_per_bundle", f"{self.files_per_bundle} is below 1")
        if not 0 <= self.near_duplicate_max_distance <= 32:
            raise ConfigError(
                "near_duplicate_max_distance",
                f"{self.near_duplicate_max_distance} is not in 0..32 (bits of a 64-bit hash)",
            )
        if not 0.0 <= self.near_duplicate_max_difference <= 10.0:
            raise ConfigError(
                "near_duplicate_max_difference",
                f"{self.near_duplicate_max_difference} is not between 0 and 10",
            )
        limits = self.limits
        if limits.max_file_bytes < 1:
            raise ConfigError("limits.max_file_bytes", f"{limits.max_file_bytes} is below 1")
        if limits.max_pixels < 1:
            raise ConfigError("limits.max_pixels", f"{limits.max_pixels} is below 1")
        if limits.max_side is not None and limits.max_side < 16:
            raise ConfigError("limits.max_side", f"{limits.max_side} is below 16 pixels")
        if not 1 <= limits.jpeg_quality <= 100:
            raise ConfigError("limits.jpeg_quality", f"{limits.jpeg_quality} is not in 1..100")
        if limits.decoder_memory_bytes < _MIN_DECODER_MEMORY:
            raise ConfigError(
                "limits.decoder_memory_bytes",
                f"{limits.decoder_memory_bytes} is below {_MIN_DECODER_MEMORY} (64 MiB)",
            )
        if not limits.decode_timeout_s > 0:
            raise ConfigError("limits.decode_timeout_s", f"{limits.decode_timeout_s} is not > 0")
        return self

    def to_json(self) -> str:
        return json.dumps(dataclasses.asdict(self), sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> IngestConfig:
        values = json.loads(text)
        return cls(**{**values, "limits": ImageLimits(**values["limits"])})

    @property
    def splits(self) -> tuple[str, ...]:
        fractions = {"train": 1.0, "eval": self.eval_fraction, "test": self.test_fraction}
        return tuple(split for split, fraction in fractions.items() if fraction > 0)
