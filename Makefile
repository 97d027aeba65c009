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

.PHONY: help setup test test-fast lint run-local bench bench-gpu

help:
	@echo "make run-local [DATA=/path/to/images] [SET='trainer.epochs=5 ...']"
	@echo "                                       run the pipeline (default: the embedded dataset)"
	@echo "make test                              full test suite (builds .venv first)"
	@echo "make test-fast                         unit tests only (seconds)"
	@echo "make bench [PARTS='input ingest']      benchmarks (default: every part)"
	@echo "make bench-gpu [OUTPUT=dir]             ResNet-50 on a CUDA machine (< 8 min; not in CI)"
	@echo "make lint | make setup"

setup: $(STAMP)

$(STAMP): pyproject.toml constraints.txt
	@test -n "$(PYTHON)" || { echo "error: python3.10 not found; pass PYTHON=/path/to/python3.10" >&2; exit 1; }
	@echo "building $(VENV) with $(PYTHON)"
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade "pip==$(PIP_VERSION)"
	$(BIN)/python -m pip install --quiet -c constraints.txt -e ".[dev]"
	@touch $(STAMP)

test: $(STAMP)
	$(BIN)/python -m pytest -q --timeout=1200

test-fast: $(STAMP)
	$(BIN)/python -m pytest -q -m "not slow" --timeout=120

lint: $(STAMP)
	$(BIN)/ruff check data_prep components pipeline benchmarks tests
	$(BIN)/ruff format --check data_prep components pipeline benchmarks tests

run-local: $(STAMP)
	$(BIN)/imgpipe run --build-dir $(BUILD) $(if $(strip $(DATA)),--data "$(DATA)") $(foreach s,$(SET),--set $(s))

bench: $(STAMP)
	$(BIN)/python -m benchmarks.run --output $(BUILD)/bench $(if $(strip $(PARTS)),--parts $(PARTS))

# On a CUDA machine only; `python -m benchmarks.gpu_bench --smoke` runs the same script on a CPU.
bench-gpu: $(STAMP)
	$(BIN)/python -m benchmarks.gpu_bench --output $(or $(OUTPUT),$(BUILD)/bench-gpu)
