"""Configs, pipeline factory, runners, lineage and the `imgpipe` CLI."""

import data_prep  # noqa: F401  (sets TF_USE_LEGACY_KERAS before TensorFlow loads)
