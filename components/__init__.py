"""TFX components and module code for imgpipe."""

import data_prep  # noqa: F401  (sets TF_USE_LEGACY_KERAS before TensorFlow loads)
