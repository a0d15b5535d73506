"""The robot's own resets, as the control loop meets them (mixed into ``deploy.runtime.loop.Controller`` through
``StateHandling``): a restart (its clock and sequence began again), a HOMED state no HOME of the episode asked for
(it homed by itself: a protective stop, an operator at its pendant), and a robot that keeps doing either.

numpy only (robot side). Each reset aborts the episode, holds and re-homes from HOLD: the robot's delay line and the
episode's motion are gone, so nothing planned before it holds. A resent HOME's late answer, read in RUN, is no reset
(``late_home_answers``): the robot homed before any command of the episode reached it, so the episode goes on. More
than ``max_robot_resets`` resets within ``robot_reset_window_s`` safe-stop the robot and end the run
(``robot_reset_storms``): a robot that keeps rebooting (power, controller) or protective-stopping (a collision) must be
looked at before it is driven again, not re-homed for as long as the goals last.
"""

from __future__ import annotations

import logging
from collections import Counter
from typing import TYPE_CHECKING

from deploy.runtime.safety import ROBOT_RESTART, UNREQUESTED_HOME
from deploy.runtime.state_check import Verdict
from deploy.runtime.state_machine import LoopState
from deploy.runtime.tick_record import EMPTY, TickRecord
from deploy.wire import StateMsg

if TYPE_CHECKING:
    from deploy.runtime.loop import Controller

logger = logging.getLogger(__name__)

HOMING_MODES = (LoopState.HOMING, LoopState.RUN)  # modes in which a HOMED state answers (or not) this episode's HOME
LATE_HOME_ANSWERS = "late_home_answers"  # count: a resent HOME's answer read in RUN (the episode goes on)
UNREQUESTED_HOMES = "unrequested_homes"  # count: HOMED in RUN with no HOME awaiting an answer (episode aborted)
ROBOT_RESET_STORMS = "robot_reset_storms"  # count: runs ended because the robot reset itself too often


class Resets:
    """The controller's handling of the robot's own resets (see the module docstring)."""

    def _home_asked_for(self: Controller, state: LoopState, verdict: Verdict) -> bool:
        """A HOMED state in HOMING or RUN: whether a HOME of this episode awaited it (each HOME is answered once).
        False only for an accepted one in RUN that none awaited: the robot homed by itself."""
        asked = self._homes_unanswered > 0
        self._homes_unanswered = max(0, self._homes_unanswered - 1)
        if state is not LoopState.RUN or not verdict.accepted:
            return True
        if asked:
            self.counts[LATE_HOME_ANSWERS] += 1  # sent before any command of the episode: nothing was applied
        return asked

    def _restart_tick(self: Controller, msg: StateMsg) -> TickRecord:
        """The robot restarted (clock and sequence began again): hold, abort the episode, re-home."""
        self.counts["robot_restarts"] += 1
        logger.warning(
            "tick %d: the robot restarted (its clock and sequence began again); holding to re-home", self.tick
        )
        return self._abort_to_hold(msg, ROBOT_RESTART, "the robot restarted: hold, then re-home")

    def _unrequested_home_tick(self: Controller, msg: StateMsg) -> TickRecord:
        """A HOMED state in RUN that no HOME of this episode asked for: the robot homed by itself (its own fault
        reaction, an operator at its pendant). Its delay line and the episode's motion are gone: hold, abort the
        episode, re-home (before: the jump home was checked as motion and 5 'too fast' states stopped the robot,
        with nothing naming what happened)."""
        self.counts[UNREQUESTED_HOMES] += 1
        index = self.episodes.current.index  # type: ignore[union-attr]
        logger.warning(
            "tick %d: the robot reports HOMED in episode %d, but no HOME of the episode awaits an answer: it homed "
            "by itself (its own fault reaction?); episode aborted, holding to re-home",
            self.tick,
            index,
        )
        return self._abort_to_hold(msg, UNREQUESTED_HOME, f"the robot homed by itself in episode {index}: re-home")

    def _abort_to_hold(self: Controller, msg: StateMsg, reason: str, why: str) -> TickRecord:
        """Abort the episode the robot's own reset ended (``reason``), hold, and re-home from HOLD; more than
        ``max_robot_resets`` resets within ``robot_reset_window_s`` -> safe stop and the run ends."""
        self._implausible_run = 0
        self.interventions.add((reason,))
        now = self._clock()
        resets = self._robot_resets
        resets.append((now, reason))
        while resets and now - resets[0][0] > self.config.robot_reset_window_s:
            resets.popleft()
        if len(resets) > self.config.max_robot_resets:
            kinds = Counter(kind for _, kind in resets)
            listed = ", ".join(f"{kind}: {count}" for kind, count in kinds.most_common())
            end = (
                f"the robot reset itself {len(resets)} times within {self.config.robot_reset_window_s:g} s "
                f"({listed}; max_robot_resets {self.config.max_robot_resets}): a robot that keeps rebooting (power, "
                "controller) or protective-stopping (a collision) must be looked at before it is driven again"
            )
            self.counts[ROBOT_RESET_STORMS] += 1
            self._safe_stop(end)
            if self.sm.state is not LoopState.DONE:
                self._finish(end)
            return self._record(msg, EMPTY, self._hold, self._hold, (reason,), float("nan"), True)
        if self.episodes.current is not None:
            self.episodes.end(None, aborted=True)
        self.line.new_episode()
        self.unreported.reset()
        if self.sm.state is not LoopState.HOLD:
            self._enter(LoopState.HOLD, why)
        self._hold_count = 0
        self._send_command(self._hold)
        return self._record(msg, EMPTY, self._hold, self._hold, (reason,), float("nan"), False)
