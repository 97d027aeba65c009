"""Where the pipeline runs: this machine, Airflow, Vertex AI; Beam options and the run lock."""
