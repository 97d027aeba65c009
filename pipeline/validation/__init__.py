"""The data gate's wiring and the label audit's record: baselines, span snapshots, audits."""
