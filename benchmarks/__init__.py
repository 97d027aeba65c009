"""Measured comparisons behind `make bench`; never part of `make test`."""
