"""The delay arithmetic, spelled out: a command sent at step t is applied at step t + k.

Step numbering: ``env.step`` calls are numbered t = 0, 1, 2, ... after a reset. The observation returned by call t
shows the state *after* the command applied at t. A unit +x command sent at t = 1 (zeros = hold otherwise) moves the
point / gripper first in the observation returned by call 1 + k:

    k = 0: moves at t = 1      k = 1: moves at t = 2      k = 2: moves at t = 3      k = 3: moves at t = 4

Pending-command order in ``observation`` (deploy/contract.py): after the state come the last H = max(delay_range)
commands sent, oldest first; with a fixed delay k = H, row 0 is the command applied at the next step.
"""

from __future__ import annotations

import numpy as np
import pytest

from envs.delayed_fetch_reach import DelayedFetchReachEnv
from envs.point_reach import PointReachEnv

SEND_AT = 1  # the step at which the unit command is sent
N_STEPS = 7  # enough to see the move for every k in 0..3
POINT_STEP_M = 0.05  # PointReach: a unit command moves exactly action_scale_m = 0.05 m
FETCH_MOVE_MIN_M = 0.02  # Fetch: a unit x command moves the gripper ~0.030 m in its first step (mocap lag)
FETCH_HOLD_MAX_M = 1e-3  # Fetch: under the hold command the gripper drifts ~2e-5 m per step


def x_displacements(env) -> np.ndarray:
    """x displacement (metres) of achieved_goal in each of N_STEPS steps; unit +x sent at SEND_AT only."""
    obs, _ = env.reset(seed=3)
    prev = obs["achieved_goal"].copy()
    moves = []
    for t in range(N_STEPS):
        action = np.zeros(env.action_space.shape)
        if t == SEND_AT:
            action[0] = 1.0
        obs, *_ = env.step(action)
        moves.append(obs["achieved_goal"][0] - prev[0])
        prev = obs["achieved_goal"].copy()
    return np.array(moves)


@pytest.mark.parametrize("k", [0, 1, 2, 3])
def test_point_unit_command_moves_first_at_t_plus_k(k: int) -> None:
    moves = x_displacements(PointReachEnv(delay=k))
    # k=2, sent at t=1: moves = [0, 0, 0, 0.05, 0, 0, 0]: exactly one 0.05 m step, at t = 1 + 2 = 3.
    expected = np.zeros(N_STEPS)
    expected[SEND_AT + k] = POINT_STEP_M
    np.testing.assert_allclose(moves, expected, atol=1e-12)


@pytest.mark.parametrize("k", [0, 1, 2, 3])
def test_fetch_unit_command_moves_gripper_first_at_t_plus_k(k: int) -> None:
    env = DelayedFetchReachEnv(delay=k, obs_noise_std_m=0.0)
    moves = x_displacements(env)
    first = SEND_AT + k
    # k=2: moves ~ [2e-5, 2e-5, 2e-5, 0.030, 0.0026, -4e-4, ...] metres: the hold steps before t=3 barely drift,
    # the gripper jumps at t = 1 + 2 = 3 and settles after.
    assert np.all(np.abs(moves[:first]) < FETCH_HOLD_MAX_M), moves
    assert moves[first] > FETCH_MOVE_MIN_M, moves
    env.close()


@pytest.mark.parametrize("make_env", [PointReachEnv, DelayedFetchReachEnv], ids=["point", "fetch"])
def test_pending_commands_oldest_first(make_env) -> None:
    env = make_env(delay=3)
    contract = env.contract
    obs, _ = env.reset(seed=0)
    state_dim, act_dim = contract.state_dim, contract.action_dim
    # Before any command: every slot holds the hold command (zeros).
    np.testing.assert_array_equal(obs["observation"][state_dim:], np.zeros(3 * act_dim))
    sent = [np.full(act_dim, v) for v in (0.1, 0.2, 0.3, 0.4)]
    for command in sent:
        obs, *_ = env.step(command)
    # After sending 0.1, 0.2, 0.3, 0.4 with H = 3: rows are [0.2, 0.3, 0.4] (oldest first, 0.1 already applied).
    pending = obs["observation"][state_dim:].reshape(3, act_dim)
    np.testing.assert_allclose(pending, np.stack(sent[1:]))
    env.close()


def test_oldest_pending_command_is_applied_next() -> None:
    env = PointReachEnv(delay=3)
    obs, _ = env.reset(seed=0)
    for command in ([0.5, 0, 0], [0, 0.5, 0], [0, 0, 0.5]):
        obs, *_ = env.step(np.array(command))
    row0 = obs["observation"][6:9].copy()  # oldest pending command: [0.5, 0, 0]
    before = obs["achieved_goal"].copy()
    obs, *_ = env.step(np.zeros(3))
    # The next step applies row 0: the point moves by 0.5 * 0.05 = 0.025 m in x.
    np.testing.assert_allclose(obs["achieved_goal"] - before, row0 * POINT_STEP_M, atol=1e-12)
    np.testing.assert_allclose(row0, [0.5, 0.0, 0.0])


def test_randomized_delay_applies_the_last_k_slots() -> None:
    """With delay_range (1, 3) the history has H = 3 rows; a k-step delay applies row H - k next."""
    env = PointReachEnv(delay_range=(1, 3))
    seen = set()
    for seed in range(40):
        obs, info = env.reset(seed=seed)
        k = info["delay"]
        seen.add(k)
        commands = [np.array([0.2 * (i + 1), 0.0, 0.0]) for i in range(3)]
        for command in commands:
            obs, _, _, _, step_info = env.step(command)
            assert step_info["delay"] == k
        before = obs["achieved_goal"].copy()
        pending = obs["observation"][6:].reshape(3, 3)
        obs, *_ = env.step(np.zeros(3))
        # k=1: applies row 2 (the newest, 0.6); k=2: row 1 (0.4); k=3: row 0 (0.2).
        np.testing.assert_allclose(obs["achieved_goal"] - before, pending[3 - k] * POINT_STEP_M, atol=1e-12)
    assert seen == {1, 2, 3}


def test_commands_are_clipped_before_they_enter_the_history() -> None:
    env = PointReachEnv(delay=1)
    env.reset(seed=0)
    obs, *_ = env.step(np.array([2.0, -3.0, 0.5]))
    # The history records what the robot will execute: the clipped command [1, -1, 0.5].
    np.testing.assert_array_equal(obs["observation"][6:], [1.0, -1.0, 0.5])
