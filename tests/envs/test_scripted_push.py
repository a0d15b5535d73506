"""The scripted push: its three phases on hand-made observations, its refusals, and what it lands on the real task."""

import numpy as np
import pytest
from stable_baselines3.common.env_util import make_vec_env

import envs  # noqa: F401  (registers the ids)
from envs.scripted_push import FETCH_METRES_PER_ACTION, ScriptedPush

BLOCK = np.array([1.3, 0.75, 0.425])
GOAL = np.array([1.3, 0.85, 0.425])  # 10 cm in +y: the line runs along +y, "behind" is -y


def observation(gripper: np.ndarray) -> dict[str, np.ndarray]:
    state = np.zeros((1, 25))
    state[0, 0:3], state[0, 3:6] = gripper, BLOCK
    return {"observation": state, "desired_goal": GOAL[None, :]}


def target_of(controller: ScriptedPush, gripper: np.ndarray) -> np.ndarray:
    """Where the command points (metres), undoing the gain (the commands tested stay inside [-1, 1])."""
    action = controller(observation(gripper))[0]
    assert action[3] == 0.0 and np.all(np.abs(action[:3]) < 1.0)
    return gripper + action[:3] * FETCH_METRES_PER_ACTION / controller.gain


def test_off_the_line_it_goes_behind_the_block_above_it():
    push = ScriptedPush()
    target = target_of(push, BLOCK + np.array([0.03, 0.0, 0.05]))
    np.testing.assert_allclose(target, BLOCK + np.array([0.0, -push.behind_m, push.hover_m]), atol=1e-12)


def test_behind_the_block_but_high_it_goes_down_then_pushes_along_the_line():
    push = ScriptedPush()
    behind_high = BLOCK + np.array([0.0, -push.behind_m, 0.03])
    np.testing.assert_allclose(target_of(push, behind_high), BLOCK + np.array([0.0, -push.behind_m, 0.0]), atol=1e-12)
    behind_down = BLOCK + np.array([0.0, -push.behind_m, 0.005])
    np.testing.assert_allclose(target_of(push, behind_down), GOAL - np.array([0.0, push.contact_m, 0.0]), atol=1e-12)


def test_bad_settings_and_unbatched_observations_are_refused():
    with pytest.raises(ValueError, match="gain must be in"):
        ScriptedPush(gain=1.5)
    with pytest.raises(ValueError, match="hover_m must be a finite distance"):
        ScriptedPush(hover_m=float("nan"))
    with pytest.raises(ValueError, match="takes a batch"):
        ScriptedPush()({"observation": np.zeros(25), "desired_goal": GOAL})


def test_it_lands_most_pushes_of_the_delayed_task():
    env = make_vec_env("DelayedFetchPush-v0", n_envs=20, seed=5, env_kwargs={"delay": 2})
    push = ScriptedPush()
    obs = env.reset()
    for _ in range(50):
        obs, _, _, infos = env.step(push(obs))
    assert np.mean([info["is_success"] for info in infos]) >= 0.7  # 89% over 100 episodes (module docstring)
