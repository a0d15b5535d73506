"""Scripted cell policies for the tests and the benchmark (not for a robot): a goal seeker and two adversaries.

numpy only. Each takes the cell arm's flat observation (``deploy.cell.policy_input``: robot state, partner position,
history, achieved goal, desired goal; float32 [B, D]) and return [B, action_dim] commands in [-1, 1]:

- :class:`GoalSeeker` commands ``gain x (goal - gripper) / action_scale_m``: it drives straight at its goal and
  ignores the partner (crossing goals make the arms' paths cross);
- :class:`Adversary` drives straight at the partner's reported position at full speed: with two of them the arms
  meet head-on unless something keeps them apart.
- :class:`WristHunter` drives at full speed at a point fixed relative to the partner's reported gripper, behind and
  above it where the partner's wrist and forearm are: what the separation barrier, which keeps only the grippers
  apart, does not see (``docs/benchmarks/cell-study.md``). Each arm has its own point, drawn as
  ``benchmarks/cell_contacts.py``'s search draws them: behind both runtimes in simulation this pair touches in every
  episode (it ignores its goal, so its episodes are alike). The barrier's reserve (2026-12-06) kept the previous pair,
  ((0.05, 0.07, 0.32), (0.23, 0.04, 0.23)), from touching at all; 17 of 300 random pairs still touched, this among
  them.
"""

from __future__ import annotations

import numpy as np

from deploy.cell.policy_input import PARTNER_FIELD
from deploy.contract import ObservationContract

GOAL_SEEKER_GAIN = 0.6  # share of the remaining distance commanded per step (below 1: the delay line overshoots)
# Each arm's target about the partner's reported gripper (metres, the hunter's frame: +x toward the partner's base)
WRIST_HUNT_OFFSETS_M = ((0.08, 0.02, 0.34), (0.08, -0.04, 0.35))


def _spans(contract: ObservationContract) -> tuple[slice, slice, slice]:
    """(gripper position, partner position, desired goal) inside the cell arm's flat observation."""
    spans = {name: (lo, hi) for name, lo, hi in contract.field_spans()}
    if PARTNER_FIELD not in spans:
        raise ValueError(f"contract {contract.name!r} has no {PARTNER_FIELD!r} field: it is not a cell arm's")
    goal = contract.observation_dim + contract.goal_dim
    return slice(*contract.position_slice), slice(*spans[PARTNER_FIELD]), slice(goal, goal + contract.goal_dim)


class GoalSeeker:
    """Straight at the goal (module docstring). :param contract: the cell arm's contract."""

    name = "goal_seeker"

    def __init__(self, contract: ObservationContract, gain: float = GOAL_SEEKER_GAIN) -> None:
        self._own, _, self._goal = _spans(contract)
        self._scale, self._gain, self._dim = contract.action_scale_m, gain, contract.action_dim

    def __call__(self, obs: np.ndarray) -> np.ndarray:
        out = np.zeros((obs.shape[0], self._dim), dtype=np.float32)
        out[:, :3] = np.clip(self._gain * (obs[:, self._goal] - obs[:, self._own]) / self._scale, -1.0, 1.0)
        return out


class Adversary:
    """Full speed at the partner (module docstring). :param contract: the cell arm's contract."""

    name = "adversary"

    def __init__(self, contract: ObservationContract) -> None:
        self._own, self._partner, _ = _spans(contract)
        self._dim = contract.action_dim

    def __call__(self, obs: np.ndarray) -> np.ndarray:
        toward = obs[:, self._partner] - obs[:, self._own]
        norm = np.maximum(np.abs(toward).max(axis=1, keepdims=True), 1e-9)
        out = np.zeros((obs.shape[0], self._dim), dtype=np.float32)
        out[:, :3] = toward / norm
        return out


class WristHunter:
    """Full speed at the partner's wrist (module docstring). :param contract: the cell arm's contract.
    :param arm: which arm this is (each hunts its own point)."""

    name = "wrist_hunter"

    def __init__(self, contract: ObservationContract, arm: int) -> None:
        self._own, self._partner, _ = _spans(contract)
        self._dim = contract.action_dim
        self._offset = np.asarray(WRIST_HUNT_OFFSETS_M[arm], dtype=np.float32)

    def __call__(self, obs: np.ndarray) -> np.ndarray:
        toward = obs[:, self._partner] + self._offset - obs[:, self._own]
        norm = np.maximum(np.abs(toward).max(axis=1, keepdims=True), 1e-9)
        out = np.zeros((obs.shape[0], self._dim), dtype=np.float32)
        out[:, :3] = toward / norm
        return out


def scripted_policy(name: str, contract: ObservationContract, arm: int) -> GoalSeeker | Adversary | WristHunter:
    """The scripted policy ``name`` (one of ``SCRIPTED``) for arm ``arm`` on the cell arm's ``contract``."""
    if name == GoalSeeker.name:
        return GoalSeeker(contract)
    if name == Adversary.name:
        return Adversary(contract)
    if name == WristHunter.name:
        return WristHunter(contract, arm)
    raise ValueError(f"no scripted cell policy {name!r}; choose one of {', '.join(SCRIPTED)}")


SCRIPTED = (GoalSeeker.name, Adversary.name, WristHunter.name)  # the names the cell's launch file and benchmark take
