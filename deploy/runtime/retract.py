"""A cell arm's retract: back toward its home, under its safety filter and separation barrier, before its HOME.

numpy only (robot side). Why: a HOME puts the whole arm in its home posture by the robot's own motion (the simulated
cell's HOME is instant), which no barrier plans. At an episode's end the arms stand at their goals, often crossed;
the homes of the cell's two arms are 0.30 m apart, and over the cell benchmark's 1,000 goal pairs an arm homed at
once touched its partner, standing at its goal, in 154 (``docs/guides/cell.md``). So each arm first drives its gripper
back to its home position as any RUN command goes: planned by the filter and cut by the barrier, which keeps it clear
of the partner doing the same; only then does its HOME move the arm, and by a few centimetres.

The command: ``RETRACT_GAIN`` of the remaining distance per control step (unit = the contract's ``action_scale_m``),
clipped to the filter's ``max_action``: the scripted goal seeker's law, below 1 so that the commands still in the
delay line do not overshoot. When the way home has stalled (the partner in the way), the arm gives way for a few
commands: away from the partner and to the right (``deploy.runtime.retract_detour``). The retract ends when the
gripper is within ``tolerance_m`` of home (``complete``), or after ``max_steps`` commands (``incomplete``: the partner
blocked the way for that long; the HOME goes out anyway and the count says so).

The episode's result is judged before the retract (at its last policy step). Its partner must not start the next
episode beside an arm still retracting: with ``start_together`` the barrier reports an episode as ended only once its
retract is over (``RetractedEpisodes``).
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np

from deploy.runtime.retract_detour import Detour
from deploy.runtime.separation import EpisodeCount
from deploy.runtime.state_machine import LoopState, StateMachine

if TYPE_CHECKING:
    from deploy.contract import ObservationContract
    from deploy.robot_spec import RobotSpec
    from deploy.runtime.loop_config import LoopConfig
    from deploy.runtime.safety import SafetyLimits

# a cell arm's retract budget (control steps): 3 s at 25 Hz; over 1,000 of the benchmark's goal pairs in simulation
# (the scripted goal seeker through both arms' filters and barriers) 90% of the retracts took 26 steps or fewer
# (benchmarks/results/cell_retract.md)
CELL_RETRACT_STEPS = 75
RETRACT_GAIN = 0.6  # share of the remaining distance commanded per control step (as the scripted goal seeker's)
RETRACTS_COMPLETE = "retracts_complete"  # count: retracts that reached home within the tolerance
RETRACTS_INCOMPLETE = "retracts_incomplete"  # count: retracts that spent max_steps short of home (HOME went anyway)
RETRACT_STEPS = "retract_steps"  # count: retract commands sent (control steps)


class Retraction:
    """The retract of one arm: where home is, how near is near enough, how long it may take; the step count.

    :param home_m: the gripper's home position (metres, the arm's frame: the robot spec's ``home.position_m``).
    :param tolerance_m: the retract is complete within this distance of home (metres).
    :param max_steps: retract commands at most per episode (control steps); 0: no retract (the HOME goes at once).
    :param action_scale_m: metres one command unit moves the gripper (the contract's ``action_scale_m``).
    :param max_action: the largest command component (command units; the filter clips to it too).
    :param action_dim: the command's size (the position components first; the rest are held at 0).
    :param counts: the controller's counts (``RETRACTS_COMPLETE``, ``RETRACTS_INCOMPLETE``, ``RETRACT_STEPS``,
        the detour's ``RETRACT_DETOURS``).
    """

    def __init__(
        self,
        home_m: Sequence[float] | None,
        tolerance_m: float,
        max_steps: int,
        action_scale_m: float,
        max_action: float,
        action_dim: int,
        counts: Counter[str],
    ) -> None:
        if max_steps < 0:
            raise ValueError(f"retract max_steps must be >= 0 control steps (0: no retract), got {max_steps}")
        if max_steps and home_m is None:
            raise ValueError(
                "a retract needs the arm's home position: the robot spec has no home.position_m (`robot-grpo "
                "calibrate` measures it), or set retract_max_steps=0"
            )
        if not (math.isfinite(tolerance_m) and tolerance_m > 0):
            raise ValueError(f"retract tolerance_m must be a finite number > 0 metres, got {tolerance_m}")
        self.home = None if home_m is None else np.asarray(home_m, dtype=np.float64)
        self.tolerance_m = float(tolerance_m)
        self.max_steps = int(max_steps)
        self._per_unit = float(action_scale_m)
        self._max_action = float(max_action)
        self._dim = int(action_dim)
        self.counts = counts
        self.detour = Detour(self._max_action, counts)
        self.steps = 0  # retract commands sent in the current retract
        self.active = False  # a retract has started and is not over yet

    @classmethod
    def for_loop(
        cls, spec: RobotSpec, config: LoopConfig, limits: SafetyLimits, contract: ObservationContract, counts: Counter
    ) -> Retraction:
        """The retract a control loop runs: home from the robot ``spec``, its settings from ``config``
        (``retract_tolerance_m``, ``retract_max_steps``), the command's scale and bound from the filter's ``limits``,
        its size from the ``contract``."""
        return cls(
            spec.home_position_m,
            config.retract_tolerance_m,
            config.retract_max_steps,
            limits.action_scale_m,
            limits.max_action,
            contract.action_dim,
            counts,
        )

    @property
    def enabled(self) -> bool:
        return self.max_steps > 0

    def start(self) -> None:
        self.steps = 0
        self.active = True
        self.detour.reset()

    def command(self, position: np.ndarray, partner: Sequence[float] | None = None) -> np.ndarray | None:
        """The next retract command from the gripper at ``position`` (metres, arm frame), or None when the retract is
        over (home within the tolerance, or ``max_steps`` spent; counted). ``partner``: the partner's reported
        gripper position (metres, this arm's frame; None: none, or an arm alone), which a give-way moves away from."""
        home = self.home
        assert home is not None  # enabled
        dims = home.shape[0]
        offset = home - position[:dims]
        if float(np.linalg.norm(offset)) <= self.tolerance_m:
            self.counts[RETRACTS_COMPLETE] += 1
            self.active = False
            return None
        if self.steps >= self.max_steps:
            self.counts[RETRACTS_INCOMPLETE] += 1
            self.active = False
            return None
        self.steps += 1
        self.counts[RETRACT_STEPS] += 1
        command = np.zeros(self._dim, dtype=np.float64)
        away = None if partner is None else position[:dims] - np.asarray(partner, dtype=np.float64)[:dims]
        toward = self.detour.command(offset, away)
        if toward is None:
            toward = RETRACT_GAIN * offset / self._per_unit
        command[:dims] = np.clip(toward, -self._max_action, self._max_action)
        return command


class RetractedEpisodes:
    """The episodes an arm has ended *and retracted from*: what its barrier reports to the partner (``ended``), so
    that a partner starting together waits for the retract too.

    :param episodes: the controller's episodes (``EpisodeTracker``: ``ended``).
    :param retraction: the arm's retract (``active`` until it is over).
    :param modes: the controller's state machine: an episode is still being retracted from in RETRACT with the
        retract not over (the loop asks whether it may HOME once the retract is over, still in RETRACT: the episode
        then counts as ended; a stop that leaves RETRACT ends the retract too).
    """

    def __init__(self, episodes: EpisodeCount, retraction: Retraction, modes: StateMachine) -> None:
        self._episodes = episodes
        self._retraction = retraction
        self._modes = modes

    @property
    def ended(self) -> int:
        retracting = self._modes.state is LoopState.RETRACT and self._retraction.active
        return self._episodes.ended - (1 if retracting else 0)
