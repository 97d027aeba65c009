"""The trainer core: input pipeline, model, training loop and export, callable without TFX.

The TFX Trainer's run_fn, the CLI and tests all call `train.train`, so the same code runs in every
setting. Importing `components` first sets TF_USE_LEGACY_KERAS before TensorFlow loads.
"""
