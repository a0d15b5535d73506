"""What the control loop believes of a state and what a rejected one costs (mixed into
``deploy.runtime.loop.Controller`` through ``StateHandling``).

numpy only (robot side). A fresh, finite state's delay line must name only commands this loop sent, in the order
sent, following from the last accepted line as a robot that applies it oldest first would (``CommandLine``); then
``state_check.StateChecker`` judges it. An accepted state becomes the anchor and refreshes the watchdog. A rejected one
(or a non-finite or malformed one) is held and counted, never planned with; the loop safe-stops after
``max_implausible_states`` in a row, after ``max_rejected_in_window`` of the last ``rejection_window_states``, when no
valid state came for ``watchdog_stop_s``, or at once when the arm did not follow the commands it applied
(``not_following``: blocked, or its position sensor froze; the e-stop drops the commands in flight). For a robot that
reports no delay line, following is reckoned from the commands sent and the spec's delay
(``unreported_following``).
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from deploy.runtime.state_check import (
    HOMED_OFF_HOME,
    NOT_FOLLOWING,
    PENDING_NOT_FIFO,
    PENDING_ORDER,
    UNSENT_PENDING,
    Verdict,
)
from deploy.runtime.tick_record import EMPTY, TickRecord
from deploy.wire import StateFlags, StateMsg

if TYPE_CHECKING:
    from deploy.runtime.loop import Controller

logger = logging.getLogger(__name__)

HOMED = int(StateFlags.HOMED)  # as a plain int: ``int & StateFlags.X`` runs enum's Python operators
REJECTED_TOO_OFTEN = "rejected_too_often"  # count: safe stops for max_rejected_in_window of the last states
OFF_HOME_REASON = f"implausible_{HOMED_OFF_HOME}"
NOT_FOLLOWING_REASON = f"implausible_{NOT_FOLLOWING}"
NO_DELAY_LINE = "no_delay_line"  # count (once): the robot reports no delay line (following: unreported_following)


class Rejections:
    """The controller's state checks and its reaction to a rejected state (see the module docstring)."""

    def _check(self: Controller, msg: StateMsg, t_in: float) -> Verdict:
        """Check the delay line against the commands sent, then run the state checker; an accepted state becomes
        the anchor and refreshes the watchdog. A line naming a command never sent is implausible: the robot's
        numbering is wrong, so its history and the commands in flight cannot be known (the checker never sees it)."""
        if self.line.unsent(msg.pending):
            self.counts[f"implausible_{UNSENT_PENDING}"] += 1
            return Verdict(False, UNSENT_PENDING)
        if self.line.out_of_order(msg.pending):
            self.counts[f"implausible_{PENDING_ORDER}"] += 1
            return Verdict(False, PENDING_ORDER)
        old_pending = self._anchor.pending if self._anchor is not None else ()
        if self.line.not_fifo(old_pending, msg.pending):
            self.counts[f"implausible_{PENDING_NOT_FIFO}"] += 1
            return Verdict(False, PENDING_NOT_FIFO)
        applied = self.line.applied_length(old_pending, msg.pending, self._anchor_sent_seq)
        homed = bool(msg.flags & HOMED)
        for_sure = self.line.applied_for_sure(old_pending, msg.pending)
        home_expected = self.checker.home_expected  # before the check: a HOMED state accepted ends it
        verdict = self.checker.check(msg, t_in, applied, homed, self.robot_link.sent_total, for_sure)
        if verdict.accepted and not msg.pending:  # no line: following is reckoned from the commands sent
            if homed or home_expected:
                self.unreported.reset()  # the arm moved home by itself
            elif self.unreported.not_following(msg.state[self._pos].tolist()):
                # the checker took it as its anchor; the immediate safe stop resets the checker (and this window)
                self.counts[NOT_FOLLOWING_REASON] += 1
                return Verdict(False, NOT_FOLLOWING)
        if verdict.accepted and not msg.pending and not self.counts[NO_DELAY_LINE]:
            self.counts[NO_DELAY_LINE] += 1  # once per run: the robot says nothing of which commands it applied
            logger.warning(
                "the robot reports no delay line (m = 0): whether the arm follows its commands is reckoned from the "
                "spec's delay over several states, so a frozen position sensor or a blocked arm is caught 5 steps "
                "late instead of 2 (README, Safety); give the robot's firmware its line"
            )
        if verdict.accepted or verdict.restart:
            self._anchor = msg
            self._anchor_sent_seq = self.line.last_sent_seq
            self._bounds = (verdict.low, verdict.high)  # type: ignore[assignment]
            self._last_valid_t = self.checker.robot_time_local(msg.t_s)
            self._to_note = (t_in, msg, verdict)
        else:
            self.counts[f"implausible_{verdict.kind}"] += 1
        return verdict

    def _implausible_tick(self: Controller, msg: StateMsg | None, reasons: tuple[str, ...]) -> TickRecord:
        """The state failed its check, was non-finite or malformed: never plan with it. Hold, count; too many in a
        row, too many of the last ``rejection_window_states``, or no valid state for ``watchdog_stop_s`` (an invalid
        state is no sign of life) -> safe stop."""
        self._implausible_run += 1
        self._hold_count = 0
        self.interventions.add(reasons)
        # A HOMED state off the home is homing's to judge (max_home_retries, whose stop names the home and the fix)
        too_often = reasons[-1] != OFF_HOME_REASON and self._rejections.record(reasons[-1])
        stale_s = self._clock() - self._last_valid_t
        if self._implausible_run >= self.config.max_implausible_states or stale_s > self.limits.watchdog_stop_s:
            self._safe_stop(
                f"{self._implausible_run} implausible, non-finite or malformed states in a row, no valid state for "
                f"{stale_s:.3f} s (last: {reasons[-1]})"
            )
            return self._record(msg, EMPTY, self._hold, self._hold, reasons, float("nan"), True)
        if reasons[-1] == NOT_FOLLOWING_REASON:  # stop now: the e-stop also drops the commands still in its line
            self._safe_stop(
                "the arm did not move along the commands it applied (implausible_not_following; by its delay line, "
                "or by the spec's delay for a robot without one): it is blocked (contact?) or its position sensor "
                "froze; check the arm and its surroundings before resuming"
            )
            return self._record(msg, EMPTY, self._hold, self._hold, reasons, float("nan"), True)
        if too_often:
            self.counts[REJECTED_TOO_OFTEN] += 1
            self._safe_stop(
                f"{self._rejections.summary()}: the robot is wrong too often to be driven (max_rejected_in_window "
                f"{self.config.max_rejected_in_window} of rejection_window_states "
                f"{self.config.rejection_window_states}); check its sensors, its link and its line bookkeeping"
            )
            return self._record(msg, EMPTY, self._hold, self._hold, reasons, float("nan"), True)
        self._send_command(self._hold)
        return self._record(msg, EMPTY, self._hold, self._hold, reasons, float("nan"), False)
