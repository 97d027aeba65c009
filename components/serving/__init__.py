"""Serving and pushing: the serving check, TFLite exports, the model card and the verified push."""
