"""The robot's own resets over time: a restart (its clock and sequence began again) and a HOMED state no HOME asked
for (it homed by itself: a protective stop, an operator at its pendant).

numpy-free, robot side. Each reset costs the episode a hold and a re-home (the loop decides that); more than
``max_robot_resets`` within ``robot_reset_window_s`` end the run: a robot that keeps rebooting (power, controller) or
protective-stopping (a collision) must be looked at before it is driven again, not re-homed for as long as the goals
last.
"""

from __future__ import annotations

from collections import Counter, deque

ROBOT_RESET_STORMS = "robot_reset_storms"  # count: runs ended because the robot reset itself too often


class ResetHistory:
    """The recent resets of the robot (loop time in seconds, reason).

    :param max_resets: resets allowed within ``window_s``; one more ends the run.
    :param window_s: seconds over which they are counted.
    """

    def __init__(self, max_resets: int, window_s: float) -> None:
        self.max_resets = max_resets
        self.window_s = window_s
        self._resets: deque[tuple[float, str]] = deque()

    def add(self, now: float, reason: str) -> str:
        """Record a reset at ``now`` (seconds); returns why the run must end ("" while within the allowance)."""
        resets = self._resets
        resets.append((now, reason))
        while resets and now - resets[0][0] > self.window_s:
            resets.popleft()
        if len(resets) <= self.max_resets:
            return ""
        kinds = Counter(kind for _, kind in resets)
        listed = ", ".join(f"{kind}: {count}" for kind, count in kinds.most_common())
        return (
            f"the robot reset itself {len(resets)} times within {self.window_s:g} s ({listed}; max_robot_resets "
            f"{self.max_resets}): a robot that keeps rebooting (power, controller) or protective-stopping (a "
            "collision) must be looked at before it is driven again"
        )
