"""The campaign's policies: adversarial ones that try to leave the workspace box, and the shipped one.

Every policy maps a float32 observation [1, D] to a float32 action [1, A] (the runtime's policy interface); the
position is the observation's first three values (metres), as the contract lays it out.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from deploy.contract import ObservationContract
from deploy.robot_spec import RobotSpec

FACES = ("+x", "-x", "+y", "-y", "+z", "-z")
PUSH_MAGNITUDES = (0.3, 0.6, 1.0)  # command units; 0.3 is below the old not-following dead band (issue 31)
BANG_BANG_SWITCH_PROB = (0.05, 0.5)  # per axis and tick
CORNER_REACH_M = 0.05  # the corner the policy aims at lies this far outside the box, on every axis
POLICY_FAMILIES = ("push", "bang_bang", "corner", "shipped")


class Push:
    """The same command every tick, at one face of the box: ``magnitude`` along ``face`` (e.g. "+y")."""

    def __init__(self, contract: ObservationContract, face: str, magnitude: float) -> None:
        action = np.zeros((1, contract.action_dim), dtype=np.float32)
        action[0, "xyz".index(face[1])] = float(magnitude) * (1.0 if face[0] == "+" else -1.0)
        self.action = action

    def __call__(self, obs: np.ndarray) -> np.ndarray:
        return self.action.copy()


class BangBang:
    """Full commands whose signs flip at random (each axis with ``switch_prob`` per tick), from its own seed."""

    def __init__(self, contract: ObservationContract, switch_prob: float, seed: int) -> None:
        self._rng = np.random.default_rng(seed)
        self._switch_prob = float(switch_prob)
        self._signs = self._rng.choice([-1.0, 1.0], size=3)
        self._action_dim = contract.action_dim

    def __call__(self, obs: np.ndarray) -> np.ndarray:
        flip = self._rng.random(3) < self._switch_prob
        self._signs[flip] *= -1.0
        action = np.zeros((1, self._action_dim), dtype=np.float32)
        action[0, :3] = self._signs
        return action


class Corner:
    """Drives at full speed toward one corner of the box, a little beyond it, from the position it is told."""

    def __init__(self, contract: ObservationContract, spec: RobotSpec, corner: tuple[int, int, int]) -> None:
        low = np.asarray(spec.workspace_low) - CORNER_REACH_M
        high = np.asarray(spec.workspace_high) + CORNER_REACH_M
        self.target = np.where(np.asarray(corner) > 0, high, low)
        self._scale = contract.action_scale_m
        self._action_dim = contract.action_dim

    def __call__(self, obs: np.ndarray) -> np.ndarray:
        action = np.zeros((1, self._action_dim), dtype=np.float32)
        action[0, :3] = np.clip((self.target - obs[0, :3]) / self._scale, -1.0, 1.0)
        return action


@dataclass(frozen=True)
class PolicyChoice:
    """A policy drawn for a run: its family and parameters (JSON-friendly)."""

    family: str
    params: dict[str, Any]

    def describe(self) -> str:
        inner = ", ".join(f"{k}={v}" for k, v in self.params.items())
        return f"{self.family}({inner})"


def draw_policy(rng: np.random.Generator) -> PolicyChoice:
    """One policy family and its parameters."""
    family = str(rng.choice(POLICY_FAMILIES))
    if family == "push":
        return PolicyChoice(family, {"face": str(rng.choice(FACES)), "magnitude": float(rng.choice(PUSH_MAGNITUDES))})
    if family == "bang_bang":
        return PolicyChoice(
            family, {"switch_prob": float(rng.uniform(*BANG_BANG_SWITCH_PROB)), "seed": int(rng.integers(2**31))}
        )
    if family == "corner":
        return PolicyChoice(family, {"corner": [int(v) for v in rng.integers(0, 2, size=3)]})
    return PolicyChoice(family, {})


def build_policy(choice: PolicyChoice, contract: ObservationContract, spec: RobotSpec, shipped: Any) -> Any:
    """The callable for ``choice`` (``shipped``: the shipped package's backend, loaded once per worker)."""
    if choice.family == "push":
        return Push(contract, choice.params["face"], choice.params["magnitude"])
    if choice.family == "bang_bang":
        return BangBang(contract, choice.params["switch_prob"], choice.params["seed"])
    if choice.family == "corner":
        return Corner(contract, spec, tuple(choice.params["corner"]))
    if choice.family == "shipped":
        return shipped
    raise ValueError(f"unknown policy family {choice.family!r}; known: {', '.join(POLICY_FAMILIES)}")
