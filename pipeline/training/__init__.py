"""The Trainer's wiring: which earlier model a run warm-starts from."""
