"""The module code TFX components import by name: Transform, Trainer, Tuner, Evaluator."""
