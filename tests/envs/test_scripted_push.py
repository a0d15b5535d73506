"""The scripted push: its phases on hand-made observations (both routes), the commands in flight the over route plans
from, its refusals, and what it lands on the real task with and without the push cell's safety filter."""

import numpy as np
import pytest
from stable_baselines3.common.env_util import make_vec_env

import envs  # noqa: F401  (registers the ids)
from envs.scripted_push import FETCH_ACTION_DIM, FETCH_METRES_PER_ACTION, FETCH_OBJECT_STATE_DIM, ScriptedPush

BLOCK = np.array([1.3, 0.75, 0.425])
GOAL = np.array([1.3, 0.85, 0.425])  # 10 cm in +y: the line runs along +y, "behind" is -y
NOTHING_IN_FLIGHT = np.zeros((2, FETCH_ACTION_DIM))  # the default delay: 2 commands sent, not yet acted on


def observation(gripper: np.ndarray, in_flight: np.ndarray = NOTHING_IN_FLIGHT) -> dict[str, np.ndarray]:
    state = np.zeros((1, FETCH_OBJECT_STATE_DIM + in_flight.size))
    state[0, 0:3], state[0, 3:6], state[0, FETCH_OBJECT_STATE_DIM:] = gripper, BLOCK, in_flight.ravel()
    return {"observation": state, "desired_goal": GOAL[None, :]}


def behind(push: ScriptedPush, height_m: float = 0.0) -> np.ndarray:
    """The point ``behind_m`` behind the block on the line, ``height_m`` above its centre."""
    return BLOCK + np.array([0.0, -push.behind_m, height_m])


def push_to(push: ScriptedPush) -> np.ndarray:
    """Where a push aims the gripper: ``contact_m`` short of the goal."""
    return GOAL - np.array([0.0, push.contact_m, 0.0])


def target_of(push: ScriptedPush, gripper: np.ndarray) -> np.ndarray:
    """Where the around route's command points (metres), undoing its gain (the commands tested stay inside [-1, 1])."""
    action = push(observation(gripper))[0]
    assert action[3] == 0.0 and np.all(np.abs(action[:3]) < 1.0)
    return gripper + action[:3] * FETCH_METRES_PER_ACTION / push.gain


def over_target_of(push: ScriptedPush, gripper: np.ndarray, gain: float, in_flight: np.ndarray = NOTHING_IN_FLIGHT):
    """Where the over route's command points (metres), from where the commands in flight leave the gripper, undoing
    ``gain`` (the commands tested stay inside [-1, 1])."""
    action = push(observation(gripper, in_flight))[0]
    assert action[3] == 0.0 and np.all(np.abs(action[:3]) < 1.0)
    return gripper + push.response_m * (in_flight[:, :3].sum(axis=0) + action[:3] / gain)


def test_around_route_in_front_of_the_block_it_passes_beside_it_on_its_own_side():
    push = ScriptedPush()
    for side in (1.0, -1.0):  # the line runs along +y: "across" is -x, so +x lies on the side of -1
        target = target_of(push, BLOCK + np.array([0.03 * side, 0.04, 0.0]))
        expected = BLOCK + np.array([push.clearance_m * side, -0.5 * push.behind_m, 0.0])
        np.testing.assert_allclose(target, expected, atol=1e-12)


def test_around_route_behind_the_block_it_lines_up_at_its_height_then_pushes():
    push = ScriptedPush()
    beside_behind = BLOCK + np.array([0.04, -push.behind_m, 0.01])
    np.testing.assert_allclose(target_of(push, beside_behind), behind(push), atol=1e-12)
    np.testing.assert_allclose(target_of(push, behind(push)), push_to(push), atol=1e-12)


def test_over_route_off_the_line_it_goes_behind_the_block_above_it():
    push = ScriptedPush(route="over")
    target = over_target_of(push, BLOCK + np.array([0.01, -0.04, 0.06]), push.travel_gain)
    np.testing.assert_allclose(target, behind(push, push.hover_m), atol=1e-12)


def test_over_route_behind_the_block_but_high_it_goes_down_then_pushes_along_the_line_more_slowly():
    push = ScriptedPush(route="over", push_gain=0.2)
    behind_high = behind(push, 0.03)
    np.testing.assert_allclose(over_target_of(push, behind_high, push.travel_gain), behind(push), atol=1e-12)
    np.testing.assert_allclose(over_target_of(push, behind(push, 0.005), 0.2), push_to(push), atol=1e-12)


def test_over_route_a_gripper_in_contact_keeps_pushing_instead_of_going_back_behind_the_block():
    push = ScriptedPush(route="over", push_gain=0.2)
    touching = BLOCK + np.array([0.01, -0.035, 0.0])  # 2 cm nearer than behind_m, 1 cm off the line: in the window
    np.testing.assert_allclose(over_target_of(push, touching, 0.2), push_to(push), atol=1e-12)
    too_far_off = BLOCK + np.array([0.03, -0.035, 0.0])  # 3 cm off the line: back behind the block, above it
    assert push(observation(too_far_off))[0, 2] > 0.0


def test_over_route_plans_from_where_the_commands_in_flight_leave_the_gripper():
    push = ScriptedPush(route="over", push_gain=0.2)
    going_down = np.array([[0.0, 0.0, -0.5, 0.0], [0.0, 0.0, -0.5, 0.0]])  # 2 x 0.5 x 3 cm: to the block's height
    target = over_target_of(push, behind(push, 0.03), 0.2, going_down)  # so it pushes already, not go down further
    np.testing.assert_allclose(target, push_to(push), atol=1e-12)


def test_over_route_a_low_gripper_rises_before_crossing_the_block():
    push = ScriptedPush(route="over")
    in_front = BLOCK + np.array([0.0, 0.05, -0.01])  # the start pose's height, the block between it and behind_m
    action = push(observation(in_front))[0]
    assert action[0] == action[1] == 0.0 and action[2] > 0.0


def test_bad_settings_and_observations_are_refused():
    with pytest.raises(ValueError, match="gain must be in"):
        ScriptedPush(gain=1.5)
    with pytest.raises(ValueError, match="push_gain must be in"):
        ScriptedPush(push_gain=0.0)
    with pytest.raises(ValueError, match="hover_m must be a finite distance"):
        ScriptedPush(hover_m=float("nan"))
    with pytest.raises(ValueError, match="route must be one of"):
        ScriptedPush(route="under")
    with pytest.raises(ValueError, match="delay must be a whole number"):
        ScriptedPush(delay=-1)
    with pytest.raises(ValueError, match="response_m must be"):
        ScriptedPush(response_m=0.0)
    with pytest.raises(ValueError, match="takes a batch"):
        ScriptedPush()({"observation": np.zeros(25), "desired_goal": GOAL})
    undelayed = observation(BLOCK, in_flight=np.zeros((0, FETCH_ACTION_DIM)))
    with pytest.raises(ValueError, match="reads the 2 commands in flight"):
        ScriptedPush(route="over")(undelayed)
    assert ScriptedPush(route="over", delay=0)(undelayed).shape == (1, FETCH_ACTION_DIM)


def success(push: ScriptedPush, env_kwargs: dict) -> float:
    env = make_vec_env("DelayedFetchPush-v0", n_envs=20, seed=5, env_kwargs={"delay": 2, **env_kwargs})
    obs = env.reset()
    for _ in range(50):
        obs, _, _, infos = env.step(push(obs))
    return float(np.mean([info["is_success"] for info in infos]))


def test_both_routes_land_nearly_every_push_with_and_without_the_cells_safety_filter():
    shield = {"safety_spec": "shipped:calibration/sim_fetch_push.yaml"}
    assert success(ScriptedPush(), {}) >= 0.85  # 97% over 300 episodes (module docstring)
    assert success(ScriptedPush(), shield) >= 0.85  # 97%
    assert success(ScriptedPush(route="over"), {}) >= 0.9  # 100% over 300 episodes, on each of four seeds
    assert success(ScriptedPush(route="over"), shield) >= 0.85  # 95%
