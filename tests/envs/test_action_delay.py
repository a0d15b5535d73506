"""envs.action_delay.ActionDelay: commands arrive k steps late, the pending ones are in the observation."""

from __future__ import annotations

import warnings

import gymnasium as gym
import numpy as np
import pytest
from gymnasium import spaces
from gymnasium.utils.env_checker import check_env

import envs  # noqa: F401  (registers the delayed Fetch ids)
from envs.action_delay import ActionDelay

ACTION_DIM = 2


class Recorder(gym.Env):
    """A Box env that records every action it receives; its observation is a step counter."""

    def __init__(self, goal_env: bool = False) -> None:
        self.action_space = spaces.Box(-1.0, 1.0, shape=(ACTION_DIM,), dtype=np.float32)
        box = spaces.Box(-np.inf, np.inf, shape=(1,), dtype=np.float64)
        self.goal_env = goal_env
        self.observation_space = (
            spaces.Dict({"observation": box, "achieved_goal": box, "desired_goal": box}) if goal_env else box
        )
        self.received: list[np.ndarray] = []

    def _obs(self):
        counter = np.array([float(len(self.received))])
        if self.goal_env:
            return {"observation": counter, "achieved_goal": counter * 2, "desired_goal": counter * 3}
        return counter

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.received = []
        return self._obs(), {}

    def step(self, action):
        self.received.append(np.array(action))
        return self._obs(), 0.0, False, False, {}


def test_commands_arrive_k_steps_late_and_the_pending_ones_are_observed():
    env = ActionDelay(Recorder(), delay=2)
    obs, info = env.reset(seed=0)
    assert info["delay"] == 2 and obs.tolist() == [0.0, 0, 0, 0, 0]  # counter, then 2 hold commands
    sent = [np.array([0.1, -0.2]), np.array([0.3, 0.4]), np.array([5.0, -5.0]), np.array([0.5, 0.6])]
    for command in sent:
        obs, *_ = env.step(command)
    received = np.array(env.unwrapped.received)
    # step 0 and 1 apply the hold command; then what was sent 2 steps before, clipped to the bounds
    np.testing.assert_allclose(received, [[0, 0], [0, 0], [0.1, -0.2], [0.3, 0.4]], atol=1e-7)
    np.testing.assert_allclose(obs[1:], [1.0, -1.0, 0.5, 0.6])  # the 2 commands in flight, oldest first, clipped
    assert env.observation_space.contains(obs.astype(np.float64))


def test_goal_env_observation_entry_carries_the_history():
    env = ActionDelay(Recorder(goal_env=True), delay_range=(1, 3))
    obs, _ = env.reset(seed=0)
    assert obs["observation"].shape == (1 + 3 * ACTION_DIM,)
    assert obs["achieved_goal"].shape == (1,) and obs["desired_goal"].shape == (1,)
    assert env.observation_space.contains(obs)


def test_random_delay_is_drawn_per_episode_from_the_env_rng():
    env = ActionDelay(Recorder(), delay_range=(1, 3))
    delays = [env.reset(seed=seed)[1]["delay"] for seed in range(40)]
    assert set(delays) == {1, 2, 3}
    assert [env.reset(seed=seed)[1]["delay"] for seed in range(40)] == delays  # the seed fixes it


def test_bad_arguments_are_refused():
    with pytest.raises(ValueError, match="delay_range"):
        ActionDelay(Recorder(), delay_range=(3, 1))
    with pytest.raises(ValueError, match="Box action space"):
        ActionDelay(gym.make("CartPole-v1"), delay=1)
    env = ActionDelay(Recorder(), delay=1)
    env.reset(seed=0)
    with pytest.raises(ValueError, match="NaN"):
        env.step(np.array([np.nan, 0.0]))


@pytest.mark.parametrize("env_id", ["DelayedFetchPush-v0", "DelayedFetchPickAndPlace-v0", "DelayedFetchSlide-v0"])
def test_registered_delayed_fetch_tasks_pass_the_env_checker(env_id):
    env = gym.make(env_id)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # Fetch declares unbounded Box observations; the checker warns about it
        check_env(env.unwrapped, skip_render_check=True)
        check_env(env, skip_render_check=True)
    obs, info = env.reset(seed=0)
    assert info["delay"] == 2 and obs["observation"].shape == (25 + 2 * 4,)
    compute_reward = env.get_wrapper_attr("compute_reward")  # vectorized, for hindsight
    goals = np.zeros((5, 3))
    assert compute_reward(goals, goals + 0.1, None).shape == (5,)


def test_delayed_fetch_reward_type_is_passed_on_and_checked():
    dense = gym.make("DelayedFetchPush-v0", reward_type="dense")
    compute_reward = dense.get_wrapper_attr("compute_reward")
    goal, achieved = np.zeros((1, 3)), np.array([[0.3, 0.4, 0.0]])
    np.testing.assert_allclose(compute_reward(achieved, goal, None), [-0.5])  # minus the distance, metres
    with pytest.raises(ValueError, match="reward_type"):
        gym.make("DelayedFetchPush-v0", reward_type="shaped")
