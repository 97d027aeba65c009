# imgpipe: every target creates the environment first when it is missing.
SHELL := /bin/bash
.DEFAULT_GOAL := help

# python3.10 is required (TFX 1.16). Override with `make PYTHON=/path/to/python3.10 ...`.
PYTHON ?= $(shell for p in python3.10 $$HOME/.pyenv/versions/3.10*/bin/python3.10 /usr/local/bin/python3.10 /usr/bin/python3.10; do \
	$$p -c 'import sys; assert sys.version_info[:2] == (3, 10)' >/dev/null 2>&1 && { echo $$p; break; }; done)
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
PIP_VERSION := 26.3
DATA ?=
SET ?=
BUILD := build
PARTS ?=
# One test worker process per core (at most 4: each holds TensorFlow and a pipeline run in memory);
# a module's tests share a worker (tests/conftest.py), handed out in the order tests/conftest.py
# sorts them (xdist would otherwise hand out the groups with most tests first, whatever they cost).
# More workers than cores cost more than the waits they fill: each collects the suite and starts
# TensorFlow itself, and the pipeline runs their tests start contend for the same cores.
# `make test TEST_WORKERS=` runs in one process.
TEST_WORKERS ?= -n auto --maxprocesses=4 --dist loadgroup --no-loadscope-reorder

# Orchestrators (Airflow 2.10, the Kubeflow V2 / Vertex compiler) get their own environment, built
# from their own full lock: the main lock plus Airflow and kfp-pipeline-spec, protobuf still 3.20.3.
ORCH_VENV := .venv-orchestrators
ORCH_BIN := $(ORCH_VENV)/bin
ORCH_STAMP := $(ORCH_VENV)/.installed
# Airflow keeps its home, SQLite database and logs under build/, never ~/airflow. Parsing the DAG
# imports TensorFlow and TFX, which takes longer than Airflow's default 30 s on a busy machine.
AIRFLOW_ENV := AIRFLOW_HOME=$(abspath $(BUILD))/airflow \
	AIRFLOW__CORE__DAGS_FOLDER=$(abspath pipeline/runners/airflow_dags) \
	AIRFLOW__CORE__LOAD_EXAMPLES=False \
	AIRFLOW__CORE__DAGBAG_IMPORT_TIMEOUT=600 \
	AIRFLOW__CORE__DAG_FILE_PROCESSOR_TIMEOUT=900
IMAGE ?= imgpipe:latest
PIPELINE_ROOT ?= gs://YOUR_BUCKET/imgpipe

.PHONY: help setup system-packages test test-fast bench-test lint run-local run-local-cluster bench bench-gpu orchestrators airflow airflow-test compile-vertex

help:
	@echo "make run-local [DATA=/path/to/images] [SET='trainer.epochs=5 ...']"
	@echo "                                       run the pipeline (default: the embedded dataset)"
	@echo "make run-local-cluster [DATA=...] [SET=...]  the same, Beam on a local job service + worker pool"
	@echo "make test                              full test suite (builds .venv first)"
	@echo "make test-fast                         unit tests only (about a minute)"
	@echo "make bench-test                        the slow benchmark parts on tiny settings (runs, not figures)"
	@echo "make bench [PARTS='input ingest']      benchmarks -> build/bench, docs/performance.md"
	@echo "make bench-gpu [OUTPUT=dir]             ResNet-50 on a CUDA machine (< 8 min; not in CI)"
	@echo "make lint | make setup"
	@echo "make airflow [DATA=...]                Airflow scheduler + UI running the DAG daily (build/airflow)"
	@echo "make airflow-test                      a season of drops on Airflow + MariaDB, and the Vertex spec"
	@echo "make compile-vertex IMAGE=... PIPELINE_ROOT=gs://... [SPAN=n DRIFT_BASELINE=gs://...]"
	@echo "                                       Vertex AI / Kubeflow job spec"

setup: $(STAMP)

# Installs print pip's errors only: its warnings (a machine's pip configuration) and the build
# backend's notices (setuptools on editable installs) are not a user's to act on.
$(STAMP): pyproject.toml constraints.txt
	@test -n "$(PYTHON)" || { echo "error: python3.10 not found; pass PYTHON=/path/to/python3.10" >&2; exit 1; }
	@echo "building $(VENV) with $(PYTHON)"
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	@$(BIN)/python -m pip install --quiet --quiet --upgrade "pip==$(PIP_VERSION)"
	@$(BIN)/python -m pip install --quiet --quiet -c constraints.txt -e ".[dev]"
	@touch $(STAMP)

# The system programs the full suite drives (Chromium, MariaDB): installed when missing.
system-packages:
	@.ci/system-packages

test: $(STAMP) system-packages
	$(BIN)/python -m pytest -q -m "not orchestrators and not bench" --timeout=1200 --durations=15 $(TEST_WORKERS)

test-fast: $(STAMP)
	$(BIN)/python -m pytest -q -m "not slow and not orchestrators and not bench" --timeout=120 $(TEST_WORKERS)

# The benchmark parts `make test` leaves out, on tiny settings, so none rots unseen: they run
# whole pipelines and several TensorFlow processes for minutes each; two at a time, one per core.
bench-test: $(STAMP)
	$(BIN)/python -m pytest -q -m bench --timeout=2400 -n 2 --dist load tests/benchmarks/test_parts.py

lint: $(STAMP)
	$(BIN)/ruff check data_prep components pipeline benchmarks tests
	$(BIN)/ruff format --check data_prep components pipeline benchmarks tests

# A run that the evaluator, the serving check or the data gate kept from pushing has finished and
# said why on its last lines: make ends it as a success rather than adding its "Error 3" line.
# `imgpipe run` itself still exits with that status (pipeline/exit_codes.py) for scripts.
DECISIONS = $(shell $(BIN)/python -c "from pipeline.exit_codes import NOT_PUSHED, GATE_STOPPED; print(NOT_PUSHED, GATE_STOPPED)" 2>/dev/null)

run-local: $(STAMP)
	@$(BIN)/imgpipe run --build-dir $(BUILD) $(if $(strip $(DATA)),--data "$(DATA)") $(foreach s,$(SET),--set $(s)); \
		status=$$?; for decision in $(DECISIONS); do [ $$status -eq $$decision ] && exit 0; done; exit $$status

run-local-cluster: $(STAMP)
	@$(BIN)/imgpipe run --runner local-cluster --build-dir $(BUILD) $(if $(strip $(DATA)),--data "$(DATA)") $(foreach s,$(SET),--set $(s)); \
		status=$$?; for decision in $(DECISIONS); do [ $$status -eq $$decision ] && exit 0; done; exit $$status

# The benchmarks' console shows their results: TensorFlow's C++ start-up lines and the Google
# client libraries' Python-version notices stay out, as in `imgpipe`'s own commands.
bench: $(STAMP)
	TF_CPP_MIN_LOG_LEVEL=$${TF_CPP_MIN_LOG_LEVEL:-3} PYTHONWARNINGS=$${PYTHONWARNINGS:-ignore::FutureWarning} \
		$(BIN)/python -m benchmarks.run --output $(BUILD)/bench $(if $(strip $(PARTS)),--parts $(PARTS))

# On a CUDA machine only; `python -m benchmarks.gpu_bench --smoke` runs the same script on a CPU.
bench-gpu: $(STAMP)
	$(BIN)/python -m benchmarks.gpu_bench --output $(or $(OUTPUT),$(BUILD)/bench-gpu)

orchestrators: $(ORCH_STAMP)

$(ORCH_STAMP): pyproject.toml constraints-orchestrators.txt
	@test -n "$(PYTHON)" || { echo "error: python3.10 not found; pass PYTHON=/path/to/python3.10" >&2; exit 1; }
	@echo "building $(ORCH_VENV) with $(PYTHON)"
	@test -x $(ORCH_BIN)/python || $(PYTHON) -m venv $(ORCH_VENV)
	@$(ORCH_BIN)/python -m pip install --quiet --quiet --upgrade "pip==$(PIP_VERSION)"
	@$(ORCH_BIN)/python -m pip install --quiet --quiet -c constraints-orchestrators.txt -e . \
		apache-airflow apache-airflow-providers-fab kfp-pipeline-spec pytest pytest-timeout
	@touch $(ORCH_STAMP)

airflow-test: $(ORCH_STAMP) system-packages
	$(AIRFLOW_ENV) $(ORCH_BIN)/python -m pytest -q --timeout=2400 \
		tests/pipeline/runners/test_airflow.py tests/pipeline/runners/test_airflow_season.py \
		tests/pipeline/runners/test_vertex.py

airflow: $(ORCH_STAMP)
	$(if $(strip $(DATA)),,$(ORCH_BIN)/imgpipe default-data --output $(BUILD)/default_data)
	$(AIRFLOW_ENV) AIRFLOW__CORE__DAGS_ARE_PAUSED_AT_CREATION=False \
		IMGPIPE_DATA="$(abspath $(or $(strip $(DATA)),$(BUILD)/default_data))" \
		IMGPIPE_BUILD_DIR=$(abspath $(BUILD)) $(ORCH_BIN)/airflow standalone

compile-vertex: $(ORCH_STAMP)
	$(ORCH_BIN)/imgpipe compile-vertex --build-dir $(BUILD) $(if $(strip $(DATA)),--data "$(DATA)") \
		--pipeline-root "$(PIPELINE_ROOT)" --image "$(IMAGE)" --output $(BUILD)/vertex/imgpipe.json \
		$(if $(strip $(SPAN)),--span $(SPAN)) $(if $(strip $(DRIFT_BASELINE)),--drift-baseline "$(DRIFT_BASELINE)")
