"""The data gate's wiring: the baselines a span is compared with and the snapshot of the span."""
