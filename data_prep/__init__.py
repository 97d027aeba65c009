"""Raw images -> validated tf.train.Examples -> sharded TFRecords (Apache Beam; no TFX imports).

This package is imported by every imgpipe entry point before TensorFlow, so it is the one place
that pins `tf.keras` to Keras 2 (tf_keras), which TFX 1.16's Transform and Evaluator require.
"""

import os

os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")
