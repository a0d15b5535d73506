# The README's two commands are `make demo` and `make test`; .ci/run calls `make test`.
PY ?= python3.11
VENV ?= .venv
BIN := $(VENV)/bin
# torch is pinned here, not in pyproject: a plain `torch` pulls a multi-GB CUDA build;
# 2.13.0 resolves to the CPU wheel on this machine. mujoco 3.3.7 is the tested version (see pyproject).
PINS := torch==2.13.0 mujoco==3.3.7

.PHONY: install test test-fast lint format demo model bench

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

# QUICK=1 starts from the shipped default model instead of training.
demo: install
	$(BIN)/robot-grpo demo $(if $(QUICK),--quick,)

# The default policy package shipped in models/ (documented in models/README.md).
model: install
	$(BIN)/robot-grpo train --name default_model --set train.total_timesteps=25600 --set train.eval_episodes=100
	$(BIN)/robot-grpo export --name default_model_export --set checkpoint=runs/default_model/model.zip --set out_dir=models/default
	cp runs/default_model/model.zip models/default_checkpoint.zip
	cp runs/default_model/learning_curve.json models/default_learning_curve.json

bench: install
	$(BIN)/python benchmarks/env_throughput.py
	$(BIN)/python benchmarks/inference_latency.py
	$(BIN)/python benchmarks/safety_filter.py
	$(BIN)/python benchmarks/control_loop.py
	$(BIN)/python benchmarks/learning.py
	$(BIN)/python benchmarks/continual.py
	nice -n 10 $(BIN)/python benchmarks/scale_out.py
