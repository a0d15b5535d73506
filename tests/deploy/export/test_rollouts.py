"""The export checks' rollouts on several envs at once: the same results as one env, in the calls' order."""

from __future__ import annotations

import numpy as np
import pytest
from export_fixtures import POINT_ENV_ID, POINT_ENV_KWARGS

from deploy.export.rollouts import closed_loop_success, closed_loop_success_on, env_contract, make_env, on_envs

SEEDS = list(range(40, 51))  # 11 seeds: parts of unequal size


@pytest.fixture
def envs():
    made = [make_env(POINT_ENV_ID, POINT_ENV_KWARGS) for _ in range(3)]
    yield made
    for env in made:
        env.close()


def toward_goal(obs: np.ndarray) -> np.ndarray:
    """A policy that succeeds on some seeds and not others: the comparison means something."""
    return np.clip(np.sin(obs[:, :2] * 7.0), -1.0, 1.0)


def test_success_on_several_envs_is_one_envs_in_seed_order(envs) -> None:
    contract = env_contract(envs[0])
    width = contract.action_dim

    def act(obs: np.ndarray) -> np.ndarray:
        out = np.zeros((len(obs), width), np.float32)
        out[:, :2] = toward_goal(obs)
        return out

    alone = closed_loop_success(envs[0], act, SEEDS)
    assert 0 < alone.sum() < len(SEEDS)
    made: list[int] = []

    def make_act():
        made.append(1)
        return act

    assert np.array_equal(closed_loop_success_on(envs, make_act, SEEDS), alone)
    assert len(made) == len(envs)  # one policy per env: a session with I/O binding is not shared between threads
    assert np.array_equal(closed_loop_success_on(envs, make_act, SEEDS[:2]), alone[:2])  # fewer seeds than envs


def test_calls_run_on_their_env_in_order_and_the_first_error_is_raised(envs) -> None:
    assert on_envs(envs, [lambda env, i=i: (i, envs.index(env)) for i in range(5)]) == [
        (0, 0),
        (1, 1),
        (2, 2),
        (3, 0),
        (4, 1),
    ]

    def broken(env):
        raise RuntimeError("the env broke")

    with pytest.raises(RuntimeError, match="the env broke"):
        on_envs(envs, [lambda env: 1, broken])
    with pytest.raises(ValueError, match="at least one env"):
        on_envs([], [lambda env: 1])
