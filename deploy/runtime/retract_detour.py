"""Give way: what a retract does when its partner blocks its way home.

numpy only (robot side). Why: two arms retracting from crossed goals head for homes on each other's side. Each
barrier passes only the share of a move that keeps the reaches apart; two arms whose reaches have closed inside the
separation (their bounds widen while they move, and each sees the other grown by a command) pass only motion away
from each other, and a retract that only ever asks for home asks for none. They stood face to face until their
retract budgets ran out: 16 of 1,000 goal pairs in the cell's simulation (``benchmarks/results/cell_retract.md``
before this rule), each ended by a HOME that moves a whole arm past its partner.

The rule. When its progress home has stalled, an arm gives way for ``hold_steps`` commands: it moves away from the
partner's reported gripper and, at once, to the right of its way home (horizontal), ``share`` of the largest command
along the sum of the two unit vectors; then it heads home again. Away restores the distance (the barrier always
passes motion away from an obstacle); right breaks the tie of two arms exactly head-on, which would otherwise back
off and meet again on the same line: it is the road's rule, and it needs no message and no priority, since the cell's
arm frames are the same frame turned half a turn about the vertical (``deploy.cell.layout``), which keeps left and
right, so two arms head-on step to opposite sides.

Stalled: the gripper came less than ``progress_m`` closer to home over the last ``window_steps`` control steps
(longer than the delay line, so a command's effect has been seen). The judgement starts over after each give-way.
The filter and the barrier cut a give-way command as any command.
"""

from __future__ import annotations

import math
from collections import Counter, deque
from collections.abc import Sequence

import numpy as np

DETOUR_WINDOW_STEPS = 6  # control steps the progress is judged over: more than the delay line (1-2 in sim and spec)
DETOUR_PROGRESS_M = 0.01  # less progress home than this over the window (metres) is a stall
DETOUR_HOLD_STEPS = 3  # commands a give-way lasts once started (control steps; 7.5 cm at most on the sim Fetch)
DETOUR_SHARE = 0.5  # the give-way command's size as a share of the largest command
DETOUR_MIN_LENGTH_M = 0.001  # a direction shorter than this (metres) has no unit vector: that part is left out
RETRACT_DETOURS = "retract_detours"  # count: give-ways started (a stall seen)


def _unit(vector: np.ndarray) -> np.ndarray:
    """``vector`` scaled to length 1, or zeros when it is shorter than ``DETOUR_MIN_LENGTH_M`` or not finite (a
    report the barrier refuses anyway: no direction is taken from it)."""
    length = float(np.linalg.norm(vector))
    if not (math.isfinite(length) and length >= DETOUR_MIN_LENGTH_M):
        return np.zeros_like(vector)
    return vector / length


class Detour:
    """The give-way rule of one arm's retract (module docstring): the stall watch and the give-way in progress.

    :param max_action: the largest command component (command units).
    :param counts: the controller's counts (``RETRACT_DETOURS``).
    :param window_steps: control steps the progress home is judged over.
    :param progress_m: less progress than this over the window is a stall (metres).
    :param hold_steps: commands a give-way lasts (control steps).
    :param share: the give-way command's size as a share of ``max_action``.
    """

    def __init__(
        self,
        max_action: float,
        counts: Counter[str],
        window_steps: int = DETOUR_WINDOW_STEPS,
        progress_m: float = DETOUR_PROGRESS_M,
        hold_steps: int = DETOUR_HOLD_STEPS,
        share: float = DETOUR_SHARE,
    ) -> None:
        if window_steps < 1 or hold_steps < 1:
            raise ValueError(f"detour window and hold must be >= 1 control step, got {window_steps}, {hold_steps}")
        if not (math.isfinite(progress_m) and progress_m > 0 and math.isfinite(share) and 0 < share <= 1):
            raise ValueError(f"detour progress_m must be > 0 metres and share in (0, 1], got {progress_m}, {share}")
        self.size = float(share) * float(max_action)
        self.progress_m = float(progress_m)
        self.hold_steps = int(hold_steps)
        self.counts = counts
        self._distances: deque[float] = deque(maxlen=int(window_steps) + 1)  # metres to home, newest last
        self._left = 0  # give-way commands still to send

    def reset(self) -> None:
        """A new retract: no history, no give-way."""
        self._distances.clear()
        self._left = 0

    def command(self, offset: np.ndarray, from_partner: Sequence[float] | None) -> np.ndarray | None:
        """The give-way command (command units, the offset's axes), or None to head home as usual.

        :param offset: home minus the gripper's position (metres, arm frame: x, y, z).
        :param from_partner: the gripper's position minus the partner's reported one (metres, arm frame), or None
            when there is no report (then only the step to the right).
        """
        self._distances.append(float(np.linalg.norm(offset)))
        if self._left == 0 and self._stalled():
            self._left = self.hold_steps
            self.counts[RETRACT_DETOURS] += 1
        if self._left == 0:
            return None
        self._left -= 1
        if self._left == 0:
            self._distances.clear()  # judge the way home afresh after the give-way
        right = np.zeros_like(offset)
        right[0], right[1] = offset[1], -offset[0]  # the way home turned a quarter turn clockwise seen from above
        right = _unit(right)
        away = np.zeros_like(offset) if from_partner is None else _unit(np.asarray(from_partner, dtype=np.float64))
        toward_partner = float(right @ away)
        if toward_partner < 0.0:  # never toward the partner: only the part of the step right across the way away
            right = right - toward_partner * away
        return self.size * _unit(away + right)

    def _stalled(self) -> bool:
        full = len(self._distances) == self._distances.maxlen
        return full and self._distances[0] - self._distances[-1] < self.progress_m
