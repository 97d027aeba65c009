"""How the ingest runs: worker processes, cores, progress lines, native stderr."""
