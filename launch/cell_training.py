"""The two-arm cell at the composition root: build the cell learner, evaluate a cell policy on fixed episodes.

``robot-grpo train`` / ``eval`` on ``TwoArmCell-v0`` (launch/train_cell.yaml) and benchmarks/learning_cell.py use
these. Evaluation runs the PettingZoo ParallelEnv (``envs.two_arm_cell_parallel_env``) with the violation rule on
(a violation ends the episode as a failure), deterministic actions, each arm acting on its own observation.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
from stable_baselines3.common.callbacks import BaseCallback

from launch.jobs import CELL_ENV_ID  # one owner: launch.jobs, which loads without torch
from launch.training import EVAL_SEED_BASE

ActByAgent = Callable[[dict[str, dict[str, np.ndarray]]], dict[str, np.ndarray]]


def is_cell_env(env_id: str) -> bool:
    return env_id == CELL_ENV_ID


def _training_cell(env_kwargs: dict[str, Any]) -> Any:
    from deploy.export.rollouts import make_env

    # GRPO's groups run every member to the time limit: a violation freezes the arms (the same failure).
    return make_env(CELL_ENV_ID, {**env_kwargs, "end_on_violation": False})


def build_cell_model(
    hyperparameters: dict[str, Any], env_kwargs: dict[str, Any], seed: int, env_threads: int, run_dir: Path | None
) -> Any:
    """A ``CellGRPO`` on ``group_size * n_groups`` training cells (hyperparameters: CellGRPO's arguments)."""
    from stable_baselines3.common.env_util import make_vec_env

    from launch.train_backends import group_size_and_groups
    from robot_grpo import CellGRPO
    from robot_grpo.threaded_vec_env import ThreadedVecEnv

    group_size, n_groups = group_size_and_groups(hyperparameters)
    vec_env = make_vec_env(
        functools.partial(_training_cell, env_kwargs),
        n_envs=group_size * n_groups,
        seed=seed,
        vec_env_cls=ThreadedVecEnv,
        vec_env_kwargs={"n_threads": env_threads},
    )
    tensorboard_log = None if run_dir is None else str(run_dir / "tb")
    return CellGRPO("MultiInputPolicy", vec_env, seed=seed, tensorboard_log=tensorboard_log, **hyperparameters)


def model_act(model: Any) -> ActByAgent:
    """The cell model's deterministic actions, one per agent from its own observation."""
    return lambda obs: model.predict(obs, deterministic=True)[0]


def evaluate_cell(act: ActByAgent, env_kwargs: dict[str, Any], seeds: list[int]) -> dict[str, Any]:
    """Team success and separation violations over seeded episodes of the PettingZoo cell (violations end them).

    :return: ``success`` (share of episodes with team success at the end), ``violations`` (episodes that broke the
        separation or touched), ``violations_per_1000``, ``episodes``.
    """
    import envs

    env = envs.two_arm_cell_parallel_env(**{**env_kwargs, "end_on_violation": True})
    successes, violations = 0, 0
    try:
        for seed in seeds:
            obs, _ = env.reset(seed=int(seed))
            infos: dict[str, Any] = {}
            while env.agents:
                obs, _, _, _, infos = env.step(act(obs))
            info = infos[env.possible_agents[0]]
            successes += bool(info["is_success"])
            violations += info["violation"] is not None
    finally:
        env.close()
    n = len(seeds)
    return {
        "success": successes / n,
        "violations": violations,
        "violations_per_1000": 1000.0 * violations / n,
        "episodes": n,
    }


class CellEvalCallback(BaseCallback):
    """Evaluate the cell model on fixed episodes every ``eval_every`` cell steps; stop at ``target``.

    :param env_kwargs: the cell's arguments (as training, the violation rule on).
    :param n_episodes: fixed episodes per evaluation (seeds ``EVAL_SEED_BASE + i``).
    :param target: stop once team success >= target (None: never stop early).
    :param eval_every: cell steps between evaluations (at the start of the next rollout after they pass).
    """

    def __init__(self, env_kwargs: dict[str, Any], n_episodes: int, target: float | None, eval_every: int) -> None:
        super().__init__()
        if eval_every < 1:
            raise ValueError(f"eval_every must be >= 1 cell step, got {eval_every}")
        self.env_kwargs = env_kwargs
        self.seeds = [EVAL_SEED_BASE + i for i in range(n_episodes)]
        self.target, self.eval_every = target, eval_every
        self.curve: list[dict[str, float]] = []
        self.eval_s = 0.0
        self._next, self._stop = eval_every, False
        self._t0 = time.perf_counter()

    def evaluate(self) -> dict[str, Any]:
        start = time.perf_counter()
        result = evaluate_cell(model_act(self.model), self.env_kwargs, self.seeds)
        self.eval_s += time.perf_counter() - start
        train_s = time.perf_counter() - self._t0 - self.eval_s
        self.curve.append({"steps": int(self.num_timesteps), "train_s": train_s, **result})
        self.logger.record("eval/team_success", result["success"])
        self.logger.record("eval/violations_per_1000", result["violations_per_1000"])
        if self.target is not None and result["success"] >= self.target:
            self._stop = True
        return result

    def _on_rollout_start(self) -> None:
        if self.num_timesteps >= self._next:
            self._next = self.num_timesteps + self.eval_every
            self.evaluate()

    def _on_step(self) -> bool:
        return not self._stop

    def _on_training_end(self) -> None:
        if not self.curve or self.curve[-1]["steps"] != self.num_timesteps:
            self.evaluate()

    @property
    def reached_target(self) -> bool:
        return self._stop
