"""The imgpipe DAG for Apache Airflow: point Airflow's dags_folder here (see README, `make
airflow`). Configured by IMGPIPE_* environment variables (pipeline/airflow_runner.ENVIRONMENT);
the schedule comes from the config preset unless IMGPIPE_SCHEDULE overrides it."""

import os

from pipeline.airflow_runner import airflow_dag, config_from_environment

dag = airflow_dag(config_from_environment(os.environ))
