# The README's two commands are `make demo` and `make test`; .ci/run calls `make test`.
PY ?= python3.11
VENV ?= .venv
BIN := $(VENV)/bin
# torch is pinned here, not in pyproject: a plain `torch` pulls a multi-GB CUDA build;
# 2.13.0 resolves to the CPU wheel on this machine. mujoco 3.3.7 is the tested version (see pyproject).
PINS := torch==2.13.0 mujoco==3.3.7

.PHONY: install test test-fast lint format demo bench

$(BIN)/python:
	$(PY) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip

install: $(BIN)/python
	$(BIN)/pip install --quiet $(PINS)
	$(BIN)/pip install --quiet -e ".[all]" $(PINS)

test: install
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/python -m pytest -q

test-fast: install
	$(BIN)/python -m pytest -q -m "not slow"

lint: install
	$(BIN)/ruff check . && $(BIN)/ruff format --check .

format:
	$(BIN)/ruff format . && $(BIN)/ruff check --fix .

demo: install
	$(BIN)/robot-grpo demo

bench: install
	$(BIN)/python benchmarks/env_throughput.py
