"""Evaluation: TFMA's module code, the evaluation report, Grad-CAM and the model card."""
