"""`python -m pipeline.cli`, the same as the `imgpipe` console script."""

from pipeline.cli import run_and_exit

run_and_exit()
