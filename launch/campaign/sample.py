"""One seed -> one campaign sample: a policy, goals, a robot fault schedule and policy faults.

Everything is drawn from ``numpy.random.default_rng(seed)``, so ``robot-grpo campaign --runs 1 --seed S`` replays
sample S exactly (the same faults at the same robot ticks; lock-step makes the run itself repeatable up to the
wall-clock timing of the loop).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from deploy.robot_spec import RobotSpec
from envs.faults.catalogue import DrawContext, draw_schedule
from envs.faults.schedule import ScheduledFault
from launch.campaign.policies import PolicyChoice, draw_policy
from launch.campaign.policy_faults import PolicyFault, draw_policy_fault
from launch.campaign.settings import CampaignSettings

WITHIN_SPEC_SHARE = 0.2  # samples whose faults are all ones the spec allows (they must cost no safe stop)
FAULT_FREE_SHARE = 0.05  # samples with no fault at all
POLICY_FAULT_SHARE = 0.25  # samples with a policy fault (besides their robot faults)
GOAL_RANGE_M = 0.15  # goals are drawn this far around the home pose on every axis (FetchReach's target range)
GOAL_SEED_RANGE = 2**31


@dataclass(frozen=True)
class Sample:
    """What one campaign run does. ``within_spec``: every fault is one the robot spec allows."""

    seed: int
    policy: PolicyChoice
    goals: np.ndarray
    goal_seeds: list[int]
    robot_faults: list[ScheduledFault]
    policy_faults: list[PolicyFault]
    within_spec: bool

    def fault_kinds(self) -> list[str]:
        """The kinds of every fault of the sample ("none" when there is none)."""
        kinds = [item.fault.kind for item in self.robot_faults] + [f.kind for f in self.policy_faults]
        return kinds or ["none"]

    def describe(self) -> dict[str, Any]:
        return {
            "seed": self.seed,
            "policy": self.policy.describe(),
            "policy_family": self.policy.family,
            "faults": [f"{item.fault.describe()}@{item.start}+{item.duration}" for item in self.robot_faults]
            + [f.describe() for f in self.policy_faults],
            "fault_kinds": self.fault_kinds(),
            "within_spec": self.within_spec,
            "goals": self.goals.tolist(),
        }


def draw_sample(seed: int, settings: CampaignSettings, spec: RobotSpec, action_dim: int) -> Sample:
    """The sample of ``seed`` (see the module docstring)."""
    rng = np.random.default_rng(seed)
    policy = draw_policy(rng)
    home = np.asarray(spec.home_position_m)
    low, high = np.asarray(spec.workspace_low), np.asarray(spec.workspace_high)
    goals = np.clip(home + rng.uniform(-GOAL_RANGE_M, GOAL_RANGE_M, size=(settings.episodes, 3)), low, high)
    goal_seeds = [int(s) for s in rng.integers(0, GOAL_SEED_RANGE, size=settings.episodes)]
    context = DrawContext(rng, spec, settings.period_s)
    mode = rng.random()
    within = mode < WITHIN_SPEC_SHARE
    if within:
        n_faults = int(rng.integers(1, 3))
    elif mode < WITHIN_SPEC_SHARE + FAULT_FREE_SHARE:
        n_faults = 0
    else:
        n_faults = int(rng.integers(1, settings.max_faults + 1)) if settings.max_faults else 0
    robot_faults = draw_schedule(context, n_faults, settings.horizon_ticks, settings.max_fault_ticks, within)
    policy_faults = []
    if not within and rng.random() < POLICY_FAULT_SHARE:
        horizon_calls = settings.episodes * settings.episode_steps
        policy_faults.append(draw_policy_fault(rng, settings.period_s, horizon_calls, action_dim))
    within_spec = not policy_faults and all(i.fault.within_spec(spec, settings.period_s) for i in robot_faults)
    return Sample(seed, policy, goals, goal_seeds, robot_faults, policy_faults, within_spec)
