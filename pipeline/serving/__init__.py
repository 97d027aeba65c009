"""Serving and predictions: the serving folder, `imgpipe predict` and its records."""
