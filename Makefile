# The README's two commands are `make demo` and `make test`; .ci/run calls `make test`.
# The first Python >= 3.11 on the PATH (python3.13, python3.12, python3.11, then python3); override with PY=...
PY ?= $(shell for p in python3.13 python3.12 python3.11 python3; do \
	command -v $$p >/dev/null 2>&1 && $$p -c 'import sys; sys.exit(sys.version_info < (3, 11))' 2>/dev/null \
	&& { echo $$p; break; }; done)
VENV ?= .venv
BIN := $(VENV)/bin
# torch is pinned here, not in pyproject: a plain `torch` pulls a multi-GB CUDA build;
# 2.13.0 resolves to the CPU wheel on this machine. mujoco 3.3.7 is the tested version (see pyproject).
PINS := torch==2.13.0 mujoco==3.3.7

.PHONY: install test test-fast lint format docs demo model model-push bench bench-push

$(BIN)/python:
	@test -n "$(PY)" || { echo "make: no Python >= 3.11 found on the PATH; install one or run make PY=/path/to/python3.11"; exit 2; }
	$(PY) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip

install: $(BIN)/python
	$(BIN)/pip install --quiet $(PINS)
	$(BIN)/pip install --quiet -e ".[all]" $(PINS)

test: install
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict --quiet
	$(BIN)/python -m pytest -q

test-fast: install
	$(BIN)/python -m pytest -q -m "not slow"

lint: install
	$(BIN)/ruff check . && $(BIN)/ruff format --check .

format:
	$(BIN)/ruff format . && $(BIN)/ruff check --fix .

# The documentation site (mkdocs.yml): build/site/, every warning an error. `$(BIN)/mkdocs serve` while editing.
docs: install
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict

# QUICK=1 starts from the shipped default model instead of training.
demo: install
	$(BIN)/robot-grpo demo $(if $(QUICK),--quick,)

# The default policy package shipped in models/ (documented in models/README.md).
model: install
	$(BIN)/robot-grpo train --name default_model --set train.total_timesteps=25600 --set train.eval_episodes=100
	$(BIN)/robot-grpo export --name default_model_export --set checkpoint=runs/default_model/model.zip --set out_dir=models/default
	cp runs/default_model/model.zip models/default_checkpoint.zip
	cp runs/default_model/learning_curve.json models/default_learning_curve.json

# The push package for the simulated push cell: trained behind the cell's safety filter (env.safety_spec), from a
# clone of the scripted push with DAgger rounds (docs/guides/push-on-the-robot.md).
model-push: install
	$(BIN)/robot-grpo train --config launch/train_delayed_push.yaml --name push_model --set train.seed=2000 --set train.total_timesteps=24000 --set env.safety_spec=shipped:calibration/sim_fetch_push.yaml --set train.demonstrations.expert=scripted_push_around --set train.demonstrations.episodes=1000 --set train.demonstrations.dagger_rounds=4
	rm -rf models/push
	$(BIN)/robot-grpo export --name push_model_export --set env.id=DelayedFetchPushRobot-v0 --set env.calibration=shipped:calibration/sim_fetch_push.yaml --set checkpoint=runs/push_model/model.zip --set out_dir=models/push --set 'variants=[fp32]'
	cp runs/push_model/learning_curve.json models/push_learning_curve.json

bench: install
	$(BIN)/python benchmarks/env_throughput.py
	$(BIN)/python benchmarks/inference_latency.py
	$(BIN)/python benchmarks/safety_filter.py
	$(BIN)/python benchmarks/control_loop.py
	$(BIN)/python benchmarks/robot_footprint.py
	$(BIN)/python benchmarks/learning.py --task easy
	$(BIN)/python benchmarks/learning.py --task hard
	$(BIN)/python benchmarks/continual.py --seeds 10 11 12 --tuned-seeds --skip-plain --rounds 3 --gate --out benchmarks/results/continual_penalty_0p25_unseen101112
	nice -n 10 $(BIN)/python benchmarks/scale_out.py

# Delayed FetchPush: GRPO from its cloned start (minutes per seed), then the off-policy peers at the wall-clock GRPO
# needs for 1M env steps from scratch (learning_push_approach: 1,601 s per seed): hours, so not part of bench.
bench-push: install
	$(BIN)/python benchmarks/learning.py --task push --variants grpo --tuned-seeds 0 --unseen-seeds 2000 2001 2002 4000 4001 4002 --budget 300000
	$(BIN)/python benchmarks/learning.py --task push --variants tqc_her tqc_her_small sac_her --tuned-seeds --unseen-seeds 1000 --sac-wall-s 1601 --name learning_push_peers
	$(BIN)/python benchmarks/learning.py --task push --name learning_push_peers --resummarize --merge benchmarks/results/learning_push_approach.json
