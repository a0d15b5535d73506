"""The scripted push: its phases on hand-made observations (both routes), its refusals, and what it lands on the real
task with and without the push cell's safety filter."""

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


def test_around_route_in_front_of_the_block_it_passes_beside_it_on_its_own_side():
    push = ScriptedPush()
    for side in (1.0, -1.0):  # the line runs along +y: "across" is -x, so +x lies on the side of -1
        target = target_of(push, BLOCK + np.array([0.03 * side, 0.04, 0.0]))
        expected = BLOCK + np.array([push.clearance_m * side, -0.5 * push.behind_m, 0.0])
        np.testing.assert_allclose(target, expected, atol=1e-12)


def test_around_route_behind_the_block_it_lines_up_at_its_height_then_pushes():
    push = ScriptedPush()
    beside_behind = BLOCK + np.array([0.04, -push.behind_m, 0.01])
    np.testing.assert_allclose(target_of(push, beside_behind), BLOCK + np.array([0.0, -push.behind_m, 0.0]), atol=1e-12)
    on_line = BLOCK + np.array([0.0, -push.behind_m, 0.0])
    np.testing.assert_allclose(target_of(push, on_line), GOAL - np.array([0.0, push.contact_m, 0.0]), atol=1e-12)


def test_over_route_off_the_line_it_goes_behind_the_block_above_it():
    push = ScriptedPush(route="over")
    target = target_of(push, BLOCK + np.array([0.03, 0.0, 0.05]))
    np.testing.assert_allclose(target, BLOCK + np.array([0.0, -push.behind_m, push.hover_m]), atol=1e-12)


def test_over_route_behind_the_block_but_high_it_goes_down_then_pushes_along_the_line():
    push = ScriptedPush(route="over")
    behind_high = BLOCK + np.array([0.0, -push.behind_m, 0.03])
    np.testing.assert_allclose(target_of(push, behind_high), BLOCK + np.array([0.0, -push.behind_m, 0.0]), atol=1e-12)
    behind_down = BLOCK + np.array([0.0, -push.behind_m, 0.005])
    np.testing.assert_allclose(target_of(push, behind_down), GOAL - np.array([0.0, push.contact_m, 0.0]), atol=1e-12)


def test_bad_settings_and_unbatched_observations_are_refused():
    with pytest.raises(ValueError, match="gain must be in"):
        ScriptedPush(gain=1.5)
    with pytest.raises(ValueError, match="hover_m must be a finite distance"):
        ScriptedPush(hover_m=float("nan"))
    with pytest.raises(ValueError, match="route must be one of"):
        ScriptedPush(route="under")
    with pytest.raises(ValueError, match="takes a batch"):
        ScriptedPush()({"observation": np.zeros(25), "desired_goal": GOAL})


def success(push: ScriptedPush, env_kwargs: dict) -> float:
    env = make_vec_env("DelayedFetchPush-v0", n_envs=20, seed=5, env_kwargs={"delay": 2, **env_kwargs})
    obs = env.reset()
    for _ in range(50):
        obs, _, _, infos = env.step(push(obs))
    return float(np.mean([info["is_success"] for info in infos]))


def test_around_route_lands_nearly_every_push_with_and_without_the_cells_safety_filter():
    shield = {"safety_spec": "shipped:calibration/sim_fetch_push.yaml"}
    assert success(ScriptedPush(), {}) >= 0.85  # 97% over 300 episodes (module docstring)
    assert success(ScriptedPush(), shield) >= 0.85  # 97%
    assert success(ScriptedPush(route="over"), shield) <= 0.75  # 51%: the descent the barrier slows
