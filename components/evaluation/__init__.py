"""Evaluation: TFMA's module code, the evaluation report and Grad-CAM."""
