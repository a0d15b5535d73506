"""What the controller does when the robot resets by itself: a restart, a HOMED state no HOME asked for, a reopened
port.

numpy only (robot side). A restart (the checker re-anchored on a chain of states: the robot's clock and sequence
began again) or a HOMED state in RUN that no HOME of the episode awaits (the robot homed by itself: its own fault
reaction, an operator at its pendant) aborts the episode: hold, then re-home from HOLD. More than
``max_robot_resets`` of those within ``robot_reset_window_s`` (``ResetHistory``) -> SAFE_STOP and the run ends. A
reopened port in HOMING or RUN aborts the episode too (what the robot did while it was down is unknown). The caller
(``ModeRules``) starts HOLD's count anew. Acts through the controller's actions (``deploy.runtime.loop.Controller``).
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from deploy.runtime.homing import LATE_HOME_ANSWERS
from deploy.runtime.robot_resets import ROBOT_RESET_STORMS
from deploy.runtime.safety import ROBOT_RESTART, UNREQUESTED_HOME
from deploy.runtime.state_check import Verdict
from deploy.runtime.state_machine import LoopState
from deploy.runtime.tick_record import EMPTY, TickRecord
from deploy.wire import StateMsg

if TYPE_CHECKING:
    from deploy.runtime.loop import Controller

logger = logging.getLogger(__name__)

RECONNECT_REHOMES = "reconnect_rehomes"  # count: episodes aborted and re-homed because the port was reopened
UNREQUESTED_HOMES = "unrequested_homes"  # count: HOMED in RUN with no HOME awaiting an answer (episode aborted)


class ResetTicks:
    """The robot's own resets, for one controller (module docstring); no state of its own: the resets over time are
    the ``ResetHistory``'s, the HOMEs awaiting an answer ``Homing``'s.

    :param controller: the controller whose parts are asked and whose actions are used.
    """

    def __init__(self, controller: Controller) -> None:
        self.ctl = controller

    def asked_for(self, state: LoopState, verdict: Verdict) -> bool:
        """A HOMED state in HOMING or RUN: whether a HOME of this episode awaited it (``Homing.asked_for``)."""
        in_motion = state in (LoopState.RUN, LoopState.RETRACT)  # a resent HOME's late answer may come in either
        asked, late = self.ctl.homing.asked_for(in_motion, verdict.accepted)
        if late:
            self.ctl.counts[LATE_HOME_ANSWERS] += 1  # sent before any command of the episode: nothing was applied
        return asked

    def restart(self, msg: StateMsg) -> TickRecord:
        """The checker confirmed a robot restart on ``msg``: hold, then re-home."""
        ctl = self.ctl
        ctl.counts["robot_restarts"] += 1
        logger.warning("tick %d: the robot restarted (its clock and sequence began again); re-homing", ctl.tick)
        return self.abort_to_hold(msg, ROBOT_RESTART, "the robot restarted: hold, then re-home")

    def unrequested_home(self, msg: StateMsg) -> TickRecord:
        """A HOMED state in RUN that no HOME of this episode asked for: the robot homed by itself (its own fault
        reaction, an operator at its pendant). Hold, abort the episode, re-home."""
        ctl = self.ctl
        ctl.counts[UNREQUESTED_HOMES] += 1
        index = ctl.episodes.current.index  # type: ignore[union-attr]
        logger.warning(
            "tick %d: the robot reports HOMED in episode %d, but no HOME of the episode awaits an answer: it homed "
            "by itself (its own fault reaction?); episode aborted, holding to re-home",
            ctl.tick,
            index,
        )
        return self.abort_to_hold(msg, UNREQUESTED_HOME, f"the robot homed by itself in episode {index}: re-home")

    def abort_to_hold(self, msg: StateMsg, reason: str, why: str) -> TickRecord:
        """Abort the episode the robot's own reset ended (``reason``), hold, and re-home from HOLD; more than
        ``max_robot_resets`` resets within ``robot_reset_window_s`` -> safe stop and the run ends."""
        ctl = self.ctl
        ctl.intake.in_a_row = 0
        ctl.interventions.add((reason,))
        end = ctl.resets.add(ctl.clock(), reason)
        if end:
            ctl.counts[ROBOT_RESET_STORMS] += 1
            ctl.safe_stop(end)
            if ctl.sm.state is not LoopState.DONE:
                ctl.finish(end)
            return ctl.record(msg, EMPTY, ctl.hold, ctl.hold, (reason,), float("nan"), True)
        ctl.episodes.abort()
        ctl.line.new_episode()
        ctl.intake.new_episode()
        if ctl.sm.state is not LoopState.HOLD:
            ctl.enter(LoopState.HOLD, why)
        ctl.outbox.command(ctl.hold)
        return ctl.record(msg, EMPTY, ctl.hold, ctl.hold, (reason,), float("nan"), False)

    def on_reconnect(self) -> None:
        """The port was reopened: what the robot did while it was down is unknown. An episode under way is aborted
        and the robot held and re-homed. The robot's numbering may have begun again: an e-stop in force is
        acknowledged by any state of the new link that reports it."""
        ctl = self.ctl
        ctl.latch.forget_numbering()
        if ctl.sm.state not in (LoopState.HOMING, LoopState.RUN, LoopState.RETRACT):
            return
        ctl.counts[RECONNECT_REHOMES] += 1
        logger.warning("tick %d: the port was reopened in %s; holding to re-home", ctl.tick, ctl.sm.state.name)
        ctl.episodes.abort()
        ctl.line.new_episode()
        ctl.inbox.clear()  # read before the reopen
        ctl.enter(LoopState.HOLD, "the port was reopened: the robot may have restarted; hold, then re-home")
