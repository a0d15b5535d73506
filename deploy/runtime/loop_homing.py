"""The control loop's homing (mixed into ``deploy.runtime.loop.Controller`` through ``StateHandling``): when HOLD
may home, starting an episode with a HOME, how long its HOMED answer is waited for, resending it, and giving up.

A HOME's answer is waited for ``home_retry_ticks()``: twice the slowest of the measured round trips and the spec's
``homing_s``, at least the configured ticks. The first HOME waits in HOLD until a round trip is known
(``_round_trip_known``). ``max_home_retries`` resent HOMEs without an answer stop the robot safely. A HOMED state
away from the spec's home pose is rejected by the state checker (``homed_off_home``) and counts as no answer.
"""

from __future__ import annotations

import logging
import math
from typing import TYPE_CHECKING

from deploy.runtime.loop_config import HOME_RETRY_ROUND_TRIPS
from deploy.runtime.state_check import HOMED_OFF_HOME
from deploy.runtime.state_machine import LoopState
from deploy.wire import HomeMsg, StateFlags, StateMsg

if TYPE_CHECKING:
    from deploy.runtime.loop import Controller

logger = logging.getLogger(__name__)

ROUND_TRIP_UNMEASURED = "round_trip_unmeasured"  # count: homed before any round trip was measured (see HOLD)
HOMED_WITH_ESTOP = "homed_with_estop_active"  # count: a HOMED state with the e-stop latched (homing not complete)


class Homing:
    """Homing decisions of the controller (see the module docstring)."""

    def _round_trip_known(self: Controller, msg: StateMsg) -> bool:
        """True once a round trip was measured (a state reported one of the holds sent, or a HOMED state came), or
        when none can be: the robot reports no delay line, or its e-stop is latched (it executes no command until a
        HOME releases it). Without it the first HOME would be resent after the
        configured ``home_retry_ticks`` even on a link slower than that, homing the robot twice. A robot whose line
        shows none of the holds within ``watchdog_stop_s`` of entering HOLD is not waited on for ever: counted
        (``round_trip_unmeasured``), logged, and the configured ticks size the wait."""
        if self._round_trips or not msg.pending or msg.flags & StateFlags.ESTOP_ACTIVE:
            return True
        waited_s = self._clock() - self._mode_since
        if waited_s < self.limits.watchdog_stop_s:
            return False
        self.counts[ROUND_TRIP_UNMEASURED] += 1
        logger.warning(
            "tick %d: no state reported a command of this loop in %.3f s of HOLD; homing with the configured "
            "home_retry_ticks (%d) as the wait for its answer",
            self.tick,
            waited_s,
            self.config.home_retry_ticks,
        )
        return True

    def _start_episode(self: Controller) -> None:
        episode = self.episodes.start_next()
        if episode is None:
            aborted = sum(result.aborted for result in self.episodes.results)
            if not aborted:
                self._finish("all goals served")
            else:  # "served" would hide that some goals were never reached for (a link failure, a safe stop)
                served = len(self.episodes.results) - aborted
                self._finish(f"all goals taken: {served} served, {aborted} aborted (see the episodes' results)")
            return
        self.line.new_episode()
        self._previous = self._hold.copy()
        self._home_retries_run = 0
        self._homes_unanswered = 0
        self._homing_counts_at_start = self._homing_faults()
        self._enter(LoopState.HOMING, f"episode {episode.index}: home (seed {episode.seed})")
        self._send_home()

    def _homing_faults(self: Controller) -> tuple[int, int]:
        """(HOMED states with the e-stop active, HOMED states away from the spec's home) counted so far in the run;
        the failure hint names those of the failing episode only (the difference since its first HOME)."""
        return self.counts[HOMED_WITH_ESTOP], self.counts[f"implausible_{HOMED_OFF_HOME}"]

    def _send_home(self: Controller) -> None:
        self._home_tick = self.tick
        self._home_sent_t = self._clock()
        self._homes_unanswered += 1
        self.checker.expect_home()
        self.unreported.reset()
        self._send(HomeMsg(self._next_seq(), self._home_sent_t, self.episodes.current.seed))  # type: ignore[union-attr]

    def home_retry_ticks(self: Controller) -> int:
        """Ticks to wait for a HOME's answer before resending it: the configured ticks, or
        ``HOME_RETRY_ROUND_TRIPS`` of the slowest of the recent round trips (commands, and HOMEs answered without a
        resend) and the spec's measured ``homing_s`` (HOME to HOMED, the arm's homing motion included), whichever is
        longer. Without ``homing_s`` the first HOME of an arm that takes longer to home than the configured wait
        would be resent until ``max_home_retries`` stopped the run."""
        slowest = max(max(self._round_trips, default=0.0), self.spec.homing_s)
        return max(self.config.home_retry_ticks, math.ceil(HOME_RETRY_ROUND_TRIPS * slowest / self.period_s))

    def _homing_retry(self: Controller) -> None:
        """No HOMED state yet (or one with the e-stop active): wait, resend the HOME, or stop once
        ``max_home_retries`` resent HOMEs went unanswered."""
        if self.tick - self._home_tick < self.home_retry_ticks():
            self._heartbeat()
            return
        if self._home_retries_run >= self.config.max_home_retries:
            self.counts["homing_failures"] += 1
            latched, off_home = (
                now - before for now, before in zip(self._homing_faults(), self._homing_counts_at_start, strict=True)
            )
            hint = ""
            if latched:
                hint = f" and that a HOME releases its e-stop ({latched} HOMED states came with it active)"
            if off_home:
                hint += (
                    f"; {off_home} HOMED states lay away from the spec's home {list(self.spec.home_position_m)} "  # type: ignore[arg-type]
                    f"(the last {self.checker.home_error_m:.4f} m, tolerance {self.checker.home_tolerance_m:.4f} m "
                    "with the noise): if the robot's home moved, re-run `robot-grpo calibrate`"
                )
            if self._repeats_since_fresh:
                hint += (
                    f"; its last {self._repeats_since_fresh} states all repeated one sequence number (a stuck sender: "
                    "a repeated state is never read, HOMED or not)"
                )
            self._safe_stop(
                f"the robot never reported HOMED: {self._home_retries_run + 1} HOMEs for episode "
                f"{self.episodes.current.index} went unanswered; check the robot's homing{hint}"  # type: ignore[union-attr]
            )
            return
        self._home_retries_run += 1
        self.counts["home_retries"] += 1
        self._send_home()
