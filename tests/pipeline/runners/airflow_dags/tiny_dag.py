"""The DAG the Airflow test runs: the shipped DAG's config (IMGPIPE_* variables) with the
runlocal trainer and in-process Beam, so a whole run takes a minute or two on tiny data."""

import dataclasses
import os

from components.trainer.trainer_config import runlocal
from pipeline.runners.airflow import airflow_dag, config_from_environment

IN_PROCESS = ("--direct_running_mode=in_memory", "--direct_num_workers=1")

dag = airflow_dag(
    dataclasses.replace(
        config_from_environment(os.environ),
        trainer=runlocal(),
        beam_args=IN_PROCESS,
        min_accuracy=0.0,  # runlocal learns nothing
    )
)
