"""Scripted cell policies for the tests and the benchmark (not for a robot): a goal seeker and an adversary.

numpy only. Both take the cell arm's flat observation (``deploy.cell.policy_input``: robot state, partner position,
history, achieved goal, desired goal; float32 [B, D]) and return [B, action_dim] commands in [-1, 1]:

- :class:`GoalSeeker` commands ``gain x (goal - gripper) / action_scale_m``: it drives straight at its goal and
  ignores the partner (crossing goals make the arms' paths cross);
- :class:`Adversary` drives straight at the partner's reported position at full speed: with two of them the arms
  meet head-on unless something keeps them apart.
"""

from __future__ import annotations

import numpy as np

from deploy.cell.policy_input import PARTNER_FIELD
from deploy.contract import ObservationContract

GOAL_SEEKER_GAIN = 0.6  # share of the remaining distance commanded per step (below 1: the delay line overshoots)


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
