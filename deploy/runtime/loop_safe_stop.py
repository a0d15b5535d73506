"""SAFE_STOP: what the controller does after a safe stop until the robot may be driven again.

numpy only (robot side). The e-stop repeats every period until the robot acknowledges it (``StopLatch``); once it is
acknowledged, an accepted state not flagged ESTOP_FROM_ROBOT recovers (WAIT_FRESH -> HOLD, when ``recover``). The
run ends when no valid state comes for ``recover_timeout_s`` since the stop (or the last valid state after it), or
when the robot keeps answering without acknowledging for ``stop_ack_timeout_s`` (timed from its first state after the
stop or after a silence: ``StopLatch``; ``estop_not_acknowledged``). A robot that restarts before acknowledging
(its numbering and clock begin again, and it is no longer in e-stop: ``StopLatch.restarted``) gets the e-stop anew
and is judged by its new numbering and clock from then on. Acts through the controller's actions
(``deploy.runtime.loop.Controller``).
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from deploy.runtime.state_check import Verdict
from deploy.runtime.state_machine import LoopState
from deploy.wire import StateFlags, StateMsg

if TYPE_CHECKING:
    from deploy.runtime.loop import Controller

logger = logging.getLogger(__name__)

ESTOP_ACTIVE = int(StateFlags.ESTOP_ACTIVE)  # as plain ints: a tick tests several bits
ESTOP_FROM_ROBOT = int(StateFlags.ESTOP_FROM_ROBOT)
ESTOP_NOT_ACKNOWLEDGED = "estop_not_acknowledged"  # count: the robot kept answering a safe stop without acknowledging
RESTARTS_IN_STOP = "robot_restarts_in_stop"  # count: the robot restarted before acknowledging; the e-stop went anew


class SafeStopTicks:
    """The SAFE_STOP ticks of one controller (module docstring); no state of its own: the acknowledgement is the
    ``StopLatch``'s, the last valid state the ``StateIntake``'s.

    :param controller: the controller whose parts are asked and whose actions are used.
    """

    def __init__(self, controller: Controller) -> None:
        self.ctl = controller

    def on_state(self, msg: StateMsg, verdict: Verdict) -> bool:
        """A fresh state in SAFE_STOP: repeat the e-stop until acknowledged; True when the robot acknowledged it and
        answers again (the loop is now in HOLD: the caller answers with the hold)."""
        ctl = self.ctl
        if not verdict.accepted and self.timed_out(f"its states were invalid (last: {verdict.kind})"):
            return False
        if not ctl.latch.acked and ctl.latch.restarted(msg.seq, msg.t_s, ctl.clock()):
            ctl.counts[RESTARTS_IN_STOP] += 1
            logger.warning(
                "tick %d: the robot restarted before acknowledging the e-stop (its numbering began again); e-stop "
                "sent anew",
                ctl.tick,
            )
            ctl.latch.reengage(ctl.clock())
        if not ctl.latch.acked:
            answering_s = ctl.latch.answering_s(ctl.clock(), msg.t_s)
            if answering_s > ctl.config.stop_ack_timeout_s:  # it hears us (it answers) but does not stop
                ctl.counts[ESTOP_NOT_ACKNOWLEDGED] += 1
                reason = (
                    f"the robot kept sending states for {answering_s:.3f} s after the e-stop without acknowledging "
                    "it (no ESTOP_ACTIVE flag): it may still execute commands; stop it with its hardware e-stop and "
                    "check its e-stop handling"
                )
                logger.error("tick %d: %s", ctl.tick, reason)
                ctl.finish(reason)
                return False
            ctl.outbox.estop(repeat=True)
            return False
        if verdict.accepted and not msg.flags & ESTOP_FROM_ROBOT and ctl.config.recover:
            ctl.enter(LoopState.WAIT_FRESH, "the robot acknowledged the stop and answers again")
            ctl.enter(LoopState.HOLD, "fresh state")
            return True
        ctl.outbox.heartbeat()
        return False

    def on_silence(self, rejected: list[str]) -> None:
        """No fresh state this period (``rejected``: the malformed ones' reasons): end the run if the robot has been
        quiet too long, else repeat the e-stop until acknowledged, then send heartbeats."""
        ctl = self.ctl
        repeats = ctl.inbox.repeats_since_fresh
        why = "it stayed silent"
        if repeats:
            why = (
                f"it sent only repeats of one state ({repeats} with the same sequence number: a frozen sensor or a "
                "stuck sender)"
            )
        if rejected:
            why = f"it sent only malformed states ({', '.join(sorted(set(rejected)))})"
        if self.timed_out(why):
            return
        if not ctl.latch.acked:  # repeat the stop every period until the robot acknowledges it
            ctl.outbox.estop(repeat=True)
            return
        ctl.outbox.heartbeat()

    def timed_out(self, why: str) -> bool:
        """Whether no valid state has come for ``recover_timeout_s`` since the stop (or the last valid state after
        it); if so the run ends, saying ``why``."""
        ctl = self.ctl
        quiet_s = ctl.clock() - max(ctl.mode_since, ctl.intake.last_valid_t)
        if quiet_s <= ctl.config.recover_timeout_s:
            return False
        ctl.finish(f"no valid state from the robot for {ctl.config.recover_timeout_s} s after a safe stop: {why}")
        return True
