"""What a control-loop run reports: per-episode results, timing statistics, interventions, counters."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from deploy.runtime.state_machine import Transition


@dataclass(frozen=True)
class EpisodeResult:
    """One served goal: final distance (metres), policy steps taken, success, or aborted by a safe stop."""

    index: int
    seed: int
    goal: np.ndarray
    success: bool
    final_distance_m: float
    steps: int
    aborted: bool
    end_reason: str = ""  # why it ended before its last step ("": it did not, or a safe stop whose reason is logged)


@dataclass
class RunReport:
    """What a run did: episodes, timing statistics, interventions, counters, state transitions."""

    episodes: list[EpisodeResult]
    timing: dict[str, float]
    interventions: dict[str, int]
    counts: dict[str, int]
    robot_errors: dict[int, int]
    decoder_errors: dict[str, int]
    transitions: list[Transition]
    ticks: int
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def success_rate(self) -> float:
        """Successful episodes / served episodes (aborted ones count as failures)."""
        return sum(e.success for e in self.episodes) / len(self.episodes) if self.episodes else float("nan")
