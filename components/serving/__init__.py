"""Serving and pushing: the serving check, TFLite exports and the verified push."""
