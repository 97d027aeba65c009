"""Data quality at ingest: near-duplicates, likely label errors and the folds an audit trains on."""
