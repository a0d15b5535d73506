"""SafetyShield: the robot's safety filter inside the training env (envs.safety_shield)."""

import dataclasses

import gymnasium as gym
import numpy as np
import pytest

import envs  # noqa: F401  (registers the ids)
from deploy.robot_spec import load_robot_spec
from deploy.shipped import shipped_path
from envs.action_delay import ActionDelay
from envs.safety_shield import SHIELD_CUT_KEY, SafetyShield

PUSH_SPEC = "shipped:calibration/sim_fetch_push.yaml"
GRIPPER = slice(0, 3)
HISTORY = slice(-8, None)  # the two commands in flight the observation ends with (delay 2, 4 components each)


def push_spec(**changes):
    return dataclasses.replace(load_robot_spec(shipped_path("calibration/sim_fetch_push.yaml")), **changes)


def rollout(env, actions, seed):
    obs, _ = env.reset(seed=seed)
    trace, cuts = [obs], []
    for action in actions:
        obs, _, _, _, info = env.step(action)
        trace.append(obs)
        cuts.append(info.get(SHIELD_CUT_KEY, False))
    return trace, cuts


def test_a_box_the_arm_never_nears_leaves_the_task_bit_for_bit():
    far = push_spec(workspace_low=(0.0, -1.0, 0.0), workspace_high=(3.0, 3.0, 2.0))
    actions = np.random.default_rng(0).uniform(-1, 1, size=(30, 4))
    shielded, cuts = rollout(gym.make("DelayedFetchPush-v0", safety_spec=far), actions, seed=4)
    plain, _ = rollout(gym.make("DelayedFetchPush-v0"), actions, seed=4)
    assert not any(cuts)
    for a, b in zip(shielded, plain, strict=True):
        for key in a:
            np.testing.assert_array_equal(a[key], b[key])


def test_commands_toward_a_near_face_are_cut_and_the_history_shows_what_was_sent():
    env = gym.make("DelayedFetchPush-v0", safety_spec=PUSH_SPEC)
    obs, _ = env.reset(seed=1)
    floor = load_robot_spec(shipped_path("calibration/sim_fetch_push.yaml")).workspace_low[2]
    assert obs["observation"][2] - floor < 0.01  # the push cell's gripper starts just above the box's floor
    obs, _, _, _, info = env.step(np.array([0.0, 0.0, -1.0, 0.0]))
    assert info[SHIELD_CUT_KEY]
    sent = obs["observation"][HISTORY][-4:]
    assert -1.0 < sent[2] <= 0.0  # the history holds the filtered command, as the runtime's does
    obs, _, _, _, info = env.step(np.array([0.0, 0.0, 1.0, 0.0]))  # away from the floor: passes unchanged
    assert not info[SHIELD_CUT_KEY]
    np.testing.assert_array_equal(obs["observation"][HISTORY][-4:], [0.0, 0.0, 1.0, 0.0])


def test_full_speed_at_every_face_keeps_the_true_gripper_inside_the_box():
    spec = load_robot_spec(shipped_path("calibration/sim_fetch_push.yaml"))
    low, high = np.array(spec.workspace_low), np.array(spec.workspace_high)
    env = gym.make("DelayedFetchPush-v0", safety_spec=spec)
    plain = gym.make("DelayedFetchPush-v0")
    escaped = False
    for axis in range(3):
        for sign in (-1.0, 1.0):
            action = np.zeros(4)
            action[axis] = sign
            trace, cuts = rollout(env, [action] * 40, seed=axis)
            grip = np.array([obs["observation"][GRIPPER] for obs in trace])
            assert np.all(grip >= low - 1e-9) and np.all(grip <= high + 1e-9), (axis, sign)
            assert any(cuts)
            plain_grip = np.array([obs["observation"][GRIPPER] for obs in rollout(plain, [action] * 40, axis)[0]])
            escaped |= bool(np.any(plain_grip < low) or np.any(plain_grip > high))
    assert escaped  # without the shield the same commands leave the box: the check can fail


def test_a_snapshot_mid_episode_restores_the_shield_bit_for_bit():
    env = gym.make("DelayedFetchPush-v0", safety_spec=PUSH_SPEC)
    env.reset(seed=2)
    rng = np.random.default_rng(1)
    for action in rng.uniform(-1, 1, size=(7, 4)):
        env.step(action)
    snapshot = env.get_wrapper_attr("snapshot")()
    actions = rng.uniform(-1, 1, size=(15, 4))
    first = [env.step(a) for a in actions]
    env.reset(options={"snapshot": snapshot})
    second = [env.step(a) for a in actions]
    for (obs_a, _, _, _, info_a), (obs_b, _, _, _, info_b) in zip(first, second, strict=True):
        np.testing.assert_array_equal(obs_a["observation"], obs_b["observation"])
        assert info_a[SHIELD_CUT_KEY] == info_b[SHIELD_CUT_KEY]
    assert any(info[SHIELD_CUT_KEY] for *_, info in first)


def test_bad_wrapping_and_a_spec_of_other_conventions_are_refused():
    from deploy.runtime.safety import SafetyLimits

    limits = SafetyLimits(workspace_low=(0.0, 0.0, 0.0), workspace_high=(1.0, 1.0, 1.0))
    with pytest.raises(ValueError, match="wraps an ActionDelay env"):
        SafetyShield(gym.make("FetchPush-v4"), limits)
    SafetyShield(ActionDelay(gym.make("FetchPush-v4"), delay=2), limits)  # the right way round
    slow = push_spec(control_period_s=0.08)
    with pytest.raises(ValueError, match="safety_spec 'sim_fetch_push'.*period"):
        gym.make("DelayedFetchPush-v0", safety_spec=slow)


def test_the_filter_plans_from_the_runtimes_bound_which_widens_toward_where_a_moving_arm_came_from():
    env = gym.make("DelayedFetchPush-v0", safety_spec=PUSH_SPEC)
    env.reset(seed=2)
    bound = env.get_wrapper_attr("bound")  # the shield's CheckedBound
    position = np.asarray(env.get_wrapper_attr("_position"))
    np.testing.assert_allclose(bound.bounds, [position, position])  # at rest: the point
    for _ in range(4):
        obs, *_ = env.step(np.array([0.0, 1.0, 0.0, 0.0]))  # sweep along y
    low, high = (np.asarray(b) for b in bound.bounds)
    position = obs["observation"][GRIPPER]
    assert np.all(low <= position) and np.all(position <= high)
    assert low[1] < position[1] - 0.02  # a moving arm's bound reaches back centimetres, as the runtime's state check
