"""Delayed-action Fetch tasks beyond Reach: gymnasium-robotics' FetchPush / FetchPickAndPlace / FetchSlide (v4),
their commands ``k`` control steps late, with snapshots for GRPO's group resets.

Built from the generic pieces any MuJoCo env can use: ``with_snapshots(ActionDelay(gym.make(task)))``, with the
Fetch env's per-step name lookups resolved once (``envs.fetch_lookups``: the same observation, bit for bit). The task's
own TimeLimit (``episode_steps``, 50) sits inside the snapshot wrapper, so a restore also restores the step count; the
ids are registered without an outer TimeLimit for that reason (GRPO reads the wrapper's ``max_episode_steps``).
DelayedFetchReach-v0 stays ``envs.delayed_fetch_reach`` (the robot task, with its calibration file and contract).
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import gymnasium as gym

if TYPE_CHECKING:
    from deploy.robot_spec import RobotSpec
    from deploy.runtime.safety import SafetyLimits
    from envs.checked_bound import CheckedBound
    from envs.snapshots import SnapshotWrapper

DEFAULT_DELAY = 2  # control steps (80 ms at Fetch's 25 Hz), as DelayedFetchReach-v0
FETCH_EPISODE_STEPS = 50  # gymnasium-robotics' Fetch time limit
REWARD_TYPES = ("sparse", "dense")  # gymnasium-robotics' Fetch reward types
DELAYED_FETCH_TASKS = {
    "DelayedFetchPush-v0": "FetchPush-v4",
    "DelayedFetchPickAndPlace-v0": "FetchPickAndPlace-v4",
    "DelayedFetchSlide-v0": "FetchSlide-v4",
}


def make_delayed_fetch(
    task: str,
    delay: int = DEFAULT_DELAY,
    delay_range: tuple[int, int] | None = None,
    distance_threshold: float | None = None,
    episode_steps: int = FETCH_EPISODE_STEPS,
    reward_type: str = "sparse",
    approach_coef: float = 0.0,
    near_goal_share: float = 0.0,
    safety_spec: RobotSpec | str | None = None,
    render_mode: str | None = None,
) -> SnapshotWrapper:
    """A gymnasium-robotics Fetch task with actuation delay and snapshots.

    :param task: the gymnasium-robotics id, e.g. "FetchPush-v4".
    :param delay: fixed delay in control steps (ignored when ``delay_range`` is given).
    :param delay_range: inclusive per-episode delay range in control steps.
    :param distance_threshold: success radius in metres (None: the task's own, 0.05).
    :param episode_steps: episode length in control steps: the task's TimeLimit, inside the snapshot wrapper.
        (``gym.make(id, max_episode_steps=n)`` would add a second TimeLimit outside it, whose count a snapshot
        cannot carry: fine for group resets, which restore at the start of an episode, but not mid-episode.)
    :param reward_type: "sparse" (-1 until the object is within the success radius, then 0) or "dense" (minus the
        object-to-goal distance in metres). Success (``info["is_success"]``) is the same for both.
    :param approach_coef: reward per metre of new closest approach of the gripper to the object
        (``envs.object_approach.ObjectApproachReward``; 0: off). Only for the object tasks.
    :param near_goal_share: share of fresh resets that start with the block between its drawn start and the goal
        and the gripper behind it (``envs.near_goal_starts.NearGoalStarts``; 0: off). A training-only curriculum:
        evaluate on the env without it.
    :param safety_spec: a robot spec (or its file; ``shipped:`` names too) whose safety filter every command passes
        before the delay line (``envs.safety_shield.SafetyShield``: the workspace barrier of the cell the policy is
        trained for; None: no filter). Only for the object tasks (checked against the push contract's conventions).
    :param render_mode: passed to the Fetch env (SB3's make_vec_env asks for "rgb_array").
    """
    import gymnasium_robotics  # noqa: F401  (registers the Fetch ids)

    from envs.action_delay import ActionDelay  # MuJoCo is imported when a Fetch env is made, not on `import envs`
    from envs.fetch_lookups import cache_fetch_lookups
    from envs.near_goal_starts import NearGoalStarts
    from envs.object_approach import ObjectApproachReward
    from envs.safety_shield import SafetyShield
    from envs.snapshots import with_snapshots

    if reward_type not in REWARD_TYPES:
        raise ValueError(f"reward_type must be one of {REWARD_TYPES}, got {reward_type!r}")
    env = gym.make(task, max_episode_steps=episode_steps, reward_type=reward_type, render_mode=render_mode)
    cache_fetch_lookups(env.unwrapped)  # the same observation with the per-step name lookups resolved once
    if distance_threshold is not None:
        if distance_threshold <= 0:
            raise ValueError(f"distance_threshold must be > 0 metres, got {distance_threshold}")
        env.unwrapped.distance_threshold = float(distance_threshold)  # the Fetch constructors fix it
    if not (math.isfinite(approach_coef) and approach_coef >= 0):  # NaN must not switch the bonus off silently
        raise ValueError(f"approach_coef must be a finite reward per metre >= 0 (0: off), got {approach_coef}")
    if near_goal_share > 0:
        env = NearGoalStarts(env, near_goal_share)  # inside the wrappers that read the first observation
    if approach_coef > 0:
        env = ObjectApproachReward(env, approach_coef)  # its episode state is carried by the snapshots
    env = ActionDelay(env, delay=delay, delay_range=delay_range)
    if safety_spec is not None:
        env = SafetyShield(env, shield_limits(safety_spec, env.delay), shield_bound(safety_spec, env.delay))
    return with_snapshots(env)


def shield_limits(safety_spec: RobotSpec | str, history_len: int) -> SafetyLimits:
    """The safety filter's limits of the robot spec ``safety_spec`` (or its file) for a Fetch object task's policy
    (the push contract with ``history_len`` commands in flight): ValueError naming the spec when they do not fit."""
    from deploy.contract import fetch_push_contract
    from deploy.robot_spec import RobotSpec, load_robot_spec
    from deploy.runtime.safety import SafetyLimits
    from deploy.shipped import resolve_path

    spec = safety_spec if isinstance(safety_spec, RobotSpec) else load_robot_spec(resolve_path(safety_spec))
    try:
        return SafetyLimits.from_spec(spec, fetch_push_contract(history_len))
    except ValueError as err:
        raise ValueError(f"safety_spec {spec.robot_id!r}: {err}") from err


def shield_bound(safety_spec: RobotSpec | str, history_len: int) -> CheckedBound:
    """The runtime's position bound of the robot spec ``safety_spec`` (or its file), reckoned from true positions
    (``envs.checked_bound``), for the push contract with ``history_len`` commands in flight."""
    from deploy.contract import fetch_push_contract
    from deploy.robot_spec import RobotSpec, load_robot_spec
    from deploy.shipped import resolve_path
    from envs.checked_bound import CheckedBound

    spec = safety_spec if isinstance(safety_spec, RobotSpec) else load_robot_spec(resolve_path(safety_spec))
    contract = fetch_push_contract(history_len)
    return CheckedBound(spec, max(abs(float(contract.action_low)), abs(float(contract.action_high))))


def register_delayed_fetch_tasks() -> None:
    """Register the ids of ``DELAYED_FETCH_TASKS`` (idempotent)."""
    for env_id, task in DELAYED_FETCH_TASKS.items():
        if env_id not in gym.registry:
            gym.register(id=env_id, entry_point="envs.delayed_fetch:make_delayed_fetch", kwargs={"task": task})
