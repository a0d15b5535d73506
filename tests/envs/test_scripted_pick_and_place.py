"""The scripted pick-and-place: its four phases on hand-made observations, its refusals, and what it lands on the real
task."""

import numpy as np
import pytest
from stable_baselines3.common.env_util import make_vec_env

import envs  # noqa: F401  (registers the ids)
from envs.scripted_pick_and_place import CLOSE, FETCH_METRES_PER_ACTION, OPEN, ScriptedPickAndPlace

BLOCK = np.array([1.3, 0.75, 0.425])
GOAL = np.array([1.35, 0.8, 0.6])  # in the air
FINGERS_OPEN = 0.05  # each finger's opening when open (metres): 0.1 in all
FINGERS_ON_BLOCK = 0.024  # each finger's opening when closed on the 5 cm block


def observation(gripper: np.ndarray, finger: float, block: np.ndarray = BLOCK) -> dict[str, np.ndarray]:
    state = np.zeros((1, 33))  # 25 Fetch entries and the 2 commands in flight
    state[0, 0:3], state[0, 3:6], state[0, 9:11] = gripper, block, finger
    return {"observation": state, "desired_goal": GOAL[None, :]}


def command(controller: ScriptedPickAndPlace, gripper: np.ndarray, finger: float, **kw) -> tuple[np.ndarray, float]:
    """Where the command points (metres, undoing the gain; the commands tested stay inside [-1, 1]) and the gripper
    command."""
    action = controller(observation(gripper, finger, **kw))[0]
    assert np.all(np.abs(action[:3]) < 1.0)
    return gripper + action[:3] * FETCH_METRES_PER_ACTION / controller.gain, action[3]


def test_away_from_the_block_it_goes_over_it_open_then_down_onto_it():
    pick = ScriptedPickAndPlace()
    target, fingers = command(pick, BLOCK + np.array([0.03, 0.02, 0.06]), 0.0)  # fingers closed, as at the start
    np.testing.assert_allclose(target, BLOCK + np.array([0.0, 0.0, pick.hover_m]), atol=1e-12)
    assert fingers == OPEN
    target, fingers = command(pick, BLOCK + np.array([0.005, 0.0, 0.04]), FINGERS_OPEN)
    np.testing.assert_allclose(target, BLOCK, atol=1e-12)
    assert fingers == OPEN


def test_on_the_block_it_closes_then_carries_it_to_the_goal_closed():
    pick = ScriptedPickAndPlace()
    on_block = BLOCK + np.array([0.0, 0.0, 0.005])
    target, fingers = command(pick, on_block, FINGERS_OPEN)
    np.testing.assert_allclose(target, BLOCK, atol=1e-12)
    assert fingers == CLOSE
    gripper = GOAL - np.array([0.0, 0.0, 0.05])  # the block held on the way up
    target, fingers = command(pick, gripper, FINGERS_ON_BLOCK, block=gripper)
    np.testing.assert_allclose(target, GOAL, atol=1e-12)
    assert fingers == CLOSE


def test_a_dropped_block_is_picked_up_again():
    pick = ScriptedPickAndPlace()
    gripper = BLOCK + np.array([0.02, 0.0, 0.03])  # the fingers closed on nothing, the block slipped out below them
    target, fingers = command(pick, gripper, 0.0)
    np.testing.assert_allclose(target, BLOCK + np.array([0.0, 0.0, pick.hover_m]), atol=1e-12)
    assert fingers == OPEN


def test_bad_settings_and_unbatched_observations_are_refused():
    with pytest.raises(ValueError, match="gain must be in"):
        ScriptedPickAndPlace(gain=0.0)
    with pytest.raises(ValueError, match="closed_m must be a finite distance"):
        ScriptedPickAndPlace(closed_m=float("inf"))
    with pytest.raises(ValueError, match="grasp_m must be a finite distance"):
        ScriptedPickAndPlace(grasp_m=-0.01)
    with pytest.raises(ValueError, match="takes a batch"):
        ScriptedPickAndPlace()({"observation": np.zeros(25), "desired_goal": GOAL})
    with pytest.raises(ValueError, match="takes a batch"):  # no finger openings: not an object task's observation
        ScriptedPickAndPlace()({"observation": np.zeros((1, 10)), "desired_goal": GOAL[None, :]})


def test_it_lands_most_pick_and_places_of_the_delayed_task():
    env = make_vec_env("DelayedFetchPickAndPlace-v0", n_envs=20, seed=5, env_kwargs={"delay": 2})
    pick = ScriptedPickAndPlace()
    obs = env.reset()
    in_the_air = obs["desired_goal"][:, 2] > BLOCK[2] + 0.01
    for _ in range(50):
        obs, _, _, infos = env.step(pick(obs))
    success = np.array([bool(info["is_success"]) for info in infos])
    assert in_the_air.any() and (~in_the_air).any()  # both kinds of goal drawn
    assert success.mean() >= 0.9  # 1,000 of 1,000 episodes (module docstring)
    assert success[in_the_air].mean() >= 0.8  # the lifts, not only the goals on the table
