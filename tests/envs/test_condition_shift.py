"""Robot-condition options: an observed history shorter than the delay, and an actuator gain error."""

import numpy as np
import pytest

from envs.point_reach import PointReachEnv

SCALE_M = 0.05  # point_reach_contract: metres per unit command per control step


def test_delay_longer_than_observed_history_still_applies_k_steps_late():
    # Policy trained with a 2-command history; the robot now lags 3 steps.
    env = PointReachEnv(delay=3, history_len=2)
    obs, _ = env.reset(seed=0)
    assert obs["observation"].shape == (6 + 2 * 3,)  # pos, vel + 2 commands of 3
    unit_x = np.array([1.0, 0.0, 0.0])
    positions = []
    for t in range(5):
        obs, *_ = env.step(unit_x if t == 0 else np.zeros(3))
        positions.append(obs["observation"][0])
    # Sent at t=0, applied at t=3: x stays 0 for steps 0..2, then moves by 0.05 m.
    np.testing.assert_array_equal(positions, [0.0, 0.0, 0.0, SCALE_M, SCALE_M])


def test_observation_shows_the_newest_commands_of_the_delay_line():
    env = PointReachEnv(delay=3, history_len=2)
    env.reset(seed=0)
    a, b, c = (np.full(3, v) for v in (0.1, 0.2, 0.3))
    for command in (a, b):
        env.step(command)
    obs, *_ = env.step(c)
    # The delay line is [a, b, c]; the observation keeps the last two, oldest first: [b, c].
    np.testing.assert_allclose(obs["observation"][6:], np.concatenate([b, c]))


def test_action_gain_scales_the_applied_command():
    env = PointReachEnv(delay=0, action_gain=1.1)
    env.reset(seed=0)
    obs, *_ = env.step(np.array([1.0, 0.0, 0.0]))
    # 1.0 unit x 1.1 gain x 0.05 m = 0.055 m.
    assert obs["observation"][0] == pytest.approx(0.055)


@pytest.mark.parametrize("gain", [0.0, 2.0, float("nan")])
def test_action_gain_out_of_range_is_refused(gain):
    with pytest.raises(ValueError, match="action_gain must be in"):
        PointReachEnv(action_gain=gain)


def test_snapshot_restores_a_delay_line_longer_than_the_observation():
    env = PointReachEnv(delay=3, history_len=1)
    env.reset(seed=4)
    for _ in range(2):
        env.step(np.array([0.5, -0.5, 0.2]))
    snap = env.snapshot()
    actions = np.random.default_rng(0).uniform(-1, 1, size=(10, 3))
    first = [env.step(a)[0]["observation"] for a in actions]
    env.reset(options={"snapshot": snap})
    second = [env.step(a)[0]["observation"] for a in actions]
    np.testing.assert_array_equal(first, second)
