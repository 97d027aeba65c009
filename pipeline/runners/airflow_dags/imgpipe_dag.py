"""The imgpipe DAG for Apache Airflow: point Airflow's dags_folder here (see docs/operations.md,
`make airflow`). Configured by IMGPIPE_* environment variables
(pipeline/runners/airflow.ENVIRONMENT); the schedule comes from the config preset unless
IMGPIPE_SCHEDULE overrides it."""

import os

from pipeline.runners.airflow import airflow_dag, config_from_environment

dag = airflow_dag(config_from_environment(os.environ))
