"""Ingest: the ingest Beam job as a TFX component and its report read back."""
