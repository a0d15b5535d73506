"""Faults of the policy callable, on the controller side: NaN output, a stall, an output of the wrong size, an
exception. ``FaultyPolicy`` wraps the run's policy and applies each fault for a window of calls."""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

import numpy as np

POLICY_FAULT_KINDS = ("policy_nan", "policy_stall", "policy_wrong_size", "policy_raise")
STALL_PERIODS = (2.0, 20.0)  # a stall lasts this many loop periods (drawn uniformly)


class PolicyFaultError(RuntimeError):
    """What a raising policy raises."""


@dataclass(frozen=True)
class PolicyFault:
    """``kind`` active for calls ``start`` .. ``start + duration - 1``; ``stall_s``: how long the first call of a
    stall's window blocks (seconds); ``size``: values a wrong-size output has."""

    kind: str
    start: int
    duration: int
    stall_s: float = 0.0
    size: int = 0

    def active(self, call: int) -> bool:
        return self.start <= call < self.start + self.duration

    def as_dict(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "start": self.start,
            "duration": self.duration,
            "stall_s": self.stall_s,
            "size": self.size,
        }

    def describe(self) -> str:
        extra = f", stall_s={self.stall_s:.3f}" if self.kind == "policy_stall" else ""
        extra += f", size={self.size}" if self.kind == "policy_wrong_size" else ""
        return f"{self.kind}(calls {self.start}+{self.duration}{extra})"


def draw_policy_fault(rng: np.random.Generator, period_s: float, horizon_calls: int, action_dim: int) -> PolicyFault:
    kind = str(rng.choice(POLICY_FAULT_KINDS))
    start = int(rng.integers(0, horizon_calls))
    duration = int(rng.integers(1, 30))
    if kind == "policy_stall":
        return PolicyFault(kind, start, 1, stall_s=float(rng.uniform(*STALL_PERIODS)) * period_s)
    if kind == "policy_wrong_size":
        size = int(rng.choice([0, action_dim - 1, action_dim + 1, 2 * action_dim]))
        return PolicyFault(kind, start, duration, size=size)
    return PolicyFault(kind, start, duration)


class FaultyPolicy:
    """The policy with its faults applied by call number; records when each stall began (``time.monotonic``).

    :param policy: float32 obs [1, D] -> float32 action [1, A].
    :param faults: the policy faults of the run.
    """

    def __init__(self, policy: Any, faults: list[PolicyFault]) -> None:
        self.policy = policy
        self.faults = list(faults)
        self.calls = 0
        self.stalls: list[tuple[float, float]] = []  # (start, seconds) of each stall

    def __call__(self, obs: np.ndarray) -> np.ndarray:
        call, t_call = self.calls, time.monotonic()
        self.calls += 1
        action = self.policy(obs)
        for fault in self.faults:
            if not fault.active(call):
                continue
            if fault.kind == "policy_nan":
                action = np.full_like(action, np.nan)
            elif fault.kind == "policy_stall":
                self.stalls.append((t_call, fault.stall_s))
                time.sleep(max(0.0, t_call + fault.stall_s - time.monotonic()))
            elif fault.kind == "policy_wrong_size":
                action = np.zeros((1, fault.size), dtype=np.float32)
            elif fault.kind == "policy_raise":
                raise PolicyFaultError(f"policy fault at call {call}")
        return action
