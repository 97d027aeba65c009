"""Writing the dataset: the plan (dedupe, label map, split), shards and the ingest's outputs."""
