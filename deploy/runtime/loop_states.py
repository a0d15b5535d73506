"""What the control loop does with each state in each mode: the per-state half of ``deploy.runtime.loop.Controller``.

numpy only (robot side). ``loop.py`` paces the ticks and owns the link (receive, send, shutdown, safe stop); this
mixin decides, for each fresh state (or a period without one), what to command given the loop's mode
(``state_machine.LoopState``). Homing lives in ``loop_homing``, the robot's own resets (a restart, a HOMED state no
HOME asked for, too many of them) in ``loop_resets``, what a state must pass and what a rejected one costs in
``loop_rejections``:

    any mode   robot e-stop flag -> SAFE_STOP; the state is checked first: its delay line must name only holds and
               commands this loop sent (``CommandLine.unsent``, else ``implausible_unsent_pending``), in the order
               sent (``implausible_pending_order``), following from the previous accepted line as a robot that
               applies it oldest first would (``implausible_pending_not_fifo``), then
               ``state_check.StateChecker``; a state with a value that is NaN/inf once cast to float32 (what the
               policy takes) is invalid, never checked
    SAFE_STOP  repeat the e-stop until the robot acknowledges it; then, on an accepted state, WAIT_FRESH -> HOLD;
               no valid state (silence, malformed, implausible or non-finite states) for ``recover_timeout_s``
               since the stop or the last valid state -> DONE (the run ends)
    WAIT_FRESH an accepted state -> HOLD; none within ``startup_timeout_s`` of connecting -> TimeoutError naming
               what was received and why it was rejected (a state length that is not the contract's: wrong package)
    HOLD       hold; ``hold_ticks`` accepted states in a row and a measured round trip -> HOMING (the next
               episode); the round trip (a state reporting one of the holds) is not needed when the robot reports
               no delay line or its e-stop is latched, and not waited on past ``watchdog_stop_s``
    HOMING     the accepted HOMED state without ESTOP_ACTIVE -> RUN (a HOMED state with the e-stop latched does not
               complete homing: counted, waited on like no answer); no answer after ``home_retry_ticks()`` -> resend
               HOME, ``max_home_retries`` resent in a row without an answer -> SAFE_STOP
    RUN        policy -> safety filter -> command; a full episode -> the next one; the robot reports its e-stop
               active (it latched a stop and executes no command) -> SAFE_STOP, the episode aborted; an accepted
               HOMED state that no HOME of the episode awaits (the robot homed by itself) -> HOLD, the episode
               aborted, re-home (``unrequested_homes``); a resent HOME's late answer is counted
               (``late_home_answers``) and the episode goes on (the robot homed before any of its commands);
               more than ``max_robot_resets`` restarts and unrequested homes within ``robot_reset_window_s``
               -> SAFE_STOP and DONE (a robot that keeps rebooting or protective-stopping)
    (HOLD, HOMING, RUN) an arm that did not follow the commands it applied (``implausible_not_following``: blocked,
               or its position sensor froze) -> SAFE_STOP at once (the e-stop drops the commands still in flight);
               an implausible, non-finite or malformed state -> hold and count; ``max_implausible_states`` in
               a row, ``max_rejected_in_window`` of the last ``rejection_window_states`` (a robot wrong on every
               other state), or no valid state for ``watchdog_stop_s`` (as in silence) -> SAFE_STOP; a confirmed robot
               restart -> HOLD (abort the episode, re-home)
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

import numpy as np

from deploy.contract import FLOAT32_MAX
from deploy.runtime.loop_homing import HOMED_WITH_ESTOP, Homing
from deploy.runtime.loop_rejections import HOMED, Rejections
from deploy.runtime.loop_resets import HOMING_MODES, Resets
from deploy.runtime.policy_guard import OVERRUN
from deploy.runtime.safety import (
    IMPLAUSIBLE_STATE,
    NAN_STATE,
    POLICY_FAULT,
    FilterResult,
    filter_action,
    hold_result,
)
from deploy.runtime.state_check import Verdict
from deploy.runtime.state_frames import STATE_LENGTH
from deploy.runtime.state_machine import LoopState
from deploy.runtime.tick_record import EMPTY, TickRecord
from deploy.wire import HOLD_SEQ, EStopMsg, EStopReason, StateFlags, StateMsg, seq_newer

if TYPE_CHECKING:
    from deploy.runtime.loop import Controller

logger = logging.getLogger(__name__)

# StateFlags bits as plain ints: ``int & StateFlags.X`` runs enum's Python operators, and a tick tests several bits
ESTOP_ACTIVE = int(StateFlags.ESTOP_ACTIVE)
ESTOP_FROM_ROBOT = int(StateFlags.ESTOP_FROM_ROBOT)
ACTIVE_MODES = (LoopState.WAIT_FRESH, LoopState.HOLD, LoopState.HOMING, LoopState.RUN)  # a robot e-stop stops these
CHECKED_MODES = (LoopState.HOLD, LoopState.HOMING, LoopState.RUN)  # modes where a bad state costs a held tick
MALFORMED_STATE = "malformed_state"  # reason of a tick whose states were all dropped at decode (state_frames.py)
NON_FINITE_OBSERVATION = "non_finite_observation"  # reason of a tick whose float32 observation held NaN/inf
ESTOP_ACTIVE_IN_RUN = "robot_estop_active_in_run"  # count: the robot reported its e-stop latched while in RUN
ROUND_TRIP_OUTLIERS = "round_trip_outliers"  # count: line round trips longer than watchdog_stop_s, not sampled
ESTOP_NOT_ACKNOWLEDGED = "estop_not_acknowledged"  # count: the robot kept answering a safe stop without acknowledging
NON_FINITE_STATE = "non_finite"  # verdict kind of a state with a NaN/inf value (as float32); counted as ``nan_states``
NAN_STATES = "nan_states"
RECONNECT_REHOMES = "reconnect_rehomes"  # count: episodes aborted and re-homed because the port was reopened
OLD_ESTOP_ACKS = "old_estop_acks"  # count: ESTOP_ACTIVE states numbered before the stop in force (not an ack)
STATE_RATE_MISMATCH = "state_rate_mismatch"  # count: the run ended because the robot steps at another rate
INVALID_STATE_PREFIXES = ("malformed_", "implausible_")  # counters of states received and rejected


class StateHandling(Homing, Resets, Rejections):
    """The per-state decisions of the controller (mixed into ``Controller``; see the module docstring)."""

    # A fresh state arrived --------------------------------------------------------------------------------------
    def _on_state(self: Controller, t_in: float, msg: StateMsg) -> TickRecord | None:
        finite = bool((np.abs(msg.state) <= FLOAT32_MAX).all())  # finite as float32 (a NaN compares False)
        if not finite:
            self.counts[NAN_STATES] += 1
        verdict = self._check(msg, t_in) if finite else Verdict(False, NON_FINITE_STATE)
        if msg.flags & ESTOP_ACTIVE and not self._stop_acked and self._answers_stop(msg):
            self._stop_acked = True
        state = self.sm.state
        if msg.flags & ESTOP_FROM_ROBOT and state in ACTIVE_MODES:
            self._safe_stop("robot reports an e-stop", send_estop=False)
            return None
        if msg.flags & ESTOP_ACTIVE and state is LoopState.RUN:  # a latched stop: our commands are not executed
            self.counts[ESTOP_ACTIVE_IN_RUN] += 1
            self._safe_stop("the robot reports its e-stop active in RUN: it executes no command; episode aborted")
            return None
        if state is LoopState.SAFE_STOP:
            return self._safe_stop_tick(msg, verdict)
        if state is LoopState.WAIT_FRESH:
            if not verdict.accepted:
                self._check_startup_timeout(self._clock())  # invalid states count as silence
                self._heartbeat()
                return None
            self._enter(LoopState.HOLD, "fresh state")
            self._hold_count = 0
            return self._hold_tick(msg, verdict)
        if msg.flags & HOMED and state in HOMING_MODES and not self._home_asked_for(state, verdict):
            return self._unrequested_home_tick(msg)
        if verdict.restart:
            return self._restart_tick(msg)
        if not verdict.accepted:
            reasons = (IMPLAUSIBLE_STATE, f"implausible_{verdict.kind}") if finite else (NAN_STATE,)
            return self._implausible_tick(msg, reasons)
        self._implausible_run = 0
        self._rejections.record()
        if state is LoopState.HOLD:
            return self._hold_tick(msg, verdict)
        if state is LoopState.HOMING:
            if msg.flags & HOMED and not msg.flags & ESTOP_ACTIVE:
                if not self._home_retries_run:  # after a resent HOME it is unknown which one this answers (Karn)
                    self._round_trips.append(t_in - self._home_sent_t)
                self._enter(LoopState.RUN, f"episode {self.episodes.current.index} starts")  # type: ignore[union-attr]
                return self._policy_tick(t_in, msg)
            if msg.flags & HOMED:  # homed, but its e-stop is latched: it would execute no command of the episode
                self.counts[HOMED_WITH_ESTOP] += 1
                logger.warning("tick %d: the robot reports HOMED with its e-stop active; not starting", self.tick)
            self._homing_retry()
            return None
        return self._policy_tick(t_in, msg)

    def _note_accepted(self: Controller) -> None:
        """Bookkeeping of the last accepted state that its command need not wait for (run after the tick's
        answer went out): the round trip it reports and the robot's own period jitter."""
        if self._to_note is None:
            return
        t_in, msg, verdict = self._to_note
        self._to_note = None
        if verdict.clock_corrected:
            self.counts["clock_offset_corrections"] += 1
        round_trip = self.line.round_trip_s(msg.pending, t_in)
        if round_trip is not None and round_trip > self.limits.watchdog_stop_s:
            # longer than the watchdog lets a state be late: no round trip of a link the loop runs on, but a line
            # that names an old command late (one such sample stretched the wait for a HOME's answer to 44 s)
            self.counts[ROUND_TRIP_OUTLIERS] += 1
        elif round_trip is not None and not self.robot_link.arrived_after_loss(msg.seq):  # a lost answer: the wait
            self._round_trips.append(round_trip)
        self.stats.on_robot_state(msg.seq, msg.t_s, restarted=bool(msg.flags & HOMED))

    def _safe_stop_tick(self: Controller, msg: StateMsg, verdict: Verdict) -> None:
        """SAFE_STOP: repeat the e-stop until acknowledged; recover once acknowledged and the robot answers again.
        An invalid state is no sign of life: the run ends once no valid state came for ``recover_timeout_s``. A
        robot that keeps answering without acknowledging the stop for ``stop_ack_timeout_s`` ends the run."""
        if not verdict.accepted and self._recover_timed_out(f"its states were invalid (last: {verdict.kind})"):
            return None
        if not self._stop_acked:
            unacknowledged_s = self._clock() - self._mode_since
            if unacknowledged_s > self.config.stop_ack_timeout_s:  # it hears us (it answers) but does not stop
                self.counts[ESTOP_NOT_ACKNOWLEDGED] += 1
                reason = (
                    f"the robot kept sending states for {unacknowledged_s:.3f} s after the e-stop without "
                    f"acknowledging it (no ESTOP_ACTIVE flag): it may still execute commands; stop it with its "
                    f"hardware e-stop and check its e-stop handling"
                )
                logger.error("tick %d: %s", self.tick, reason)
                self._finish(reason)
                return None
            self._send(EStopMsg(self._next_seq(), self._clock(), EStopReason.WATCHDOG))
            self.counts["estop_repeats"] += 1
            return None
        if verdict.accepted and not msg.flags & ESTOP_FROM_ROBOT and self.config.recover:
            self._enter(LoopState.WAIT_FRESH, "the robot acknowledged the stop and answers again")
            self._enter(LoopState.HOLD, "fresh state")
            self._hold_count = 0
            return self._hold_tick(msg, verdict)
        self._heartbeat()
        return None

    def _hold_tick(self: Controller, msg: StateMsg, verdict: Verdict) -> TickRecord:
        """HOLD: answer with the hold; after ``hold_ticks`` accepted states in a row, and once the round trip that
        sizes the wait for a HOME's answer is known (``_round_trip_known``), home for the next episode."""
        self._hold_count = self._hold_count + 1 if verdict.accepted else 0
        self._send_command(self._hold)
        if self._hold_count >= self.config.hold_ticks and self._round_trip_known(msg):
            self._start_episode()
        return self._record(msg, EMPTY, self._hold, self._hold, (), float("nan"), False)

    def _policy_tick(self: Controller, t_in: float, msg: StateMsg) -> TickRecord | None:
        """RUN, on an accepted state (``_check`` made it the anchor and set ``_bounds``; a rejected one never gets
        here): build the observation, ask the policy, filter, send (or end the episode)."""
        goal = self.episodes.current.goal  # type: ignore[union-attr]
        if self.episodes.full:
            self.episodes.end(msg.state, aborted=False)
            self._start_episode()
            return None
        if self.episodes.steps and msg.pending and msg.pending[-1] == HOLD_SEQ:
            self.counts["robot_held"] += 1  # our previous command was lost or reached the robot after its step
        if len(msg.pending) > self.spec.delay_range[1]:
            self.counts["line_longer_than_spec"] += 1  # the robot's delay grew past its spec: recalibrate
        self.line.sync(msg.pending)
        flat = self.contract.flat_observation(msg.state, self.line.history, goal)
        if not np.isfinite(flat).all():  # what the policy would get, after the float32 cast
            # the state passed its checks, so a goal beyond float32's range: no later tick can do better
            self.counts["non_finite_observations"] += 1
            self.interventions.add((NON_FINITE_OBSERVATION,))
            self._safe_stop("the observation is not finite as float32 (a goal beyond float32's range?)")
            return self._record(msg, flat, self._hold, self._hold, (NON_FINITE_OBSERVATION,), float("nan"), True)
        action, fault = self.guard.infer(flat)
        asked = self.guard.asked_id  # the tick's record names the policy asked, whatever happens next
        proposed = action if action is not None else self._hold
        age = self._clock() - self._last_valid_t
        if fault and fault != OVERRUN:
            result = hold_result(self.contract.action_dim, POLICY_FAULT)
        else:
            result = filter_action(
                msg.state[self._pos],
                self.line.displacement_m(self._dims),
                proposed,
                self._previous,
                age,
                self.limits,
                self._bounds,
            )
            if fault:
                result = FilterResult(result.action, (POLICY_FAULT, *result.reasons), result.stop)
        failing = self.guard.failing_for(self._clock())
        if failing >= self.config.policy_fault_stop_s:
            self.interventions.add(result.reasons)
            self._safe_stop(f"the policy failed ({self.guard.last_fault}) for {failing:.3f} s")
            return self._record(msg, flat, proposed, self._hold, result.reasons, float("nan"), True, asked)
        return self._apply(result, t_in, msg, flat, proposed, counts_as_step=True, policy_id=asked)

    def _apply(
        self,
        result: FilterResult,
        t_in: float | None,
        msg: StateMsg | None,
        flat: np.ndarray,
        proposed: np.ndarray,
        counts_as_step: bool,
        policy_id: str = "",
    ) -> TickRecord | None:
        """Send the filter's command (or stop); ``policy_id``: the policy asked this tick ("" when none was)."""
        self.interventions.add(result.reasons)
        if result.stop:
            self._safe_stop("watchdog: no fresh valid state within watchdog_stop_s")
            return self._record(msg, flat, proposed, self._hold, result.reasons, float("nan"), True, policy_id)
        t_out = self._send_command(result.action)
        latency = float("nan")
        if t_in is not None:
            latency = t_out - t_in
            self.stats.on_command(self.tick, t_in, t_out, restart=counts_as_step and self.episodes.steps == 0)
        if counts_as_step:
            self.episodes.step_taken()
        return self._record(msg, flat, proposed, result.action, result.reasons, latency, False, policy_id)

    # No fresh state this period ---------------------------------------------------------------------------------
    def _on_silence(self: Controller) -> TickRecord | None:
        state = self.sm.state
        now = self._clock()
        rejected = self.robot_link.take_rejected()
        if rejected and state in CHECKED_MODES:  # states came but were malformed: hold and count, like implausible
            return self._implausible_tick(None, (MALFORMED_STATE, *sorted({f"malformed_{r}" for r in rejected})))
        if state is LoopState.RUN:
            age = now - self._last_valid_t
            if age <= self.limits.watchdog_hold_s:
                self._heartbeat()  # a late frame is no fault yet; a lock-step robot whose answer was lost replies
                return None
            position = self._anchor.state[self._pos]  # type: ignore[union-attr]
            result = filter_action(
                position,
                self.line.displacement_m(self._dims),
                self._hold,
                self._previous,
                age,
                self.limits,
                self._bounds,
            )
            return self._apply(result, None, None, EMPTY, self._hold, counts_as_step=False)
        if state is LoopState.HOLD:
            self._hold_count = 0
            if now - self._last_valid_t > self.limits.watchdog_stop_s:
                self._safe_stop("watchdog while holding")
                return None
        if state is LoopState.WAIT_FRESH:
            self._check_startup_timeout(now)
        if state is LoopState.SAFE_STOP:
            why = "it stayed silent"
            if self._repeats_since_fresh:
                why = (
                    f"it sent only repeats of one state ({self._repeats_since_fresh} with the same sequence number: a "
                    "frozen sensor or a stuck sender)"
                )
            if rejected:
                why = f"it sent only malformed states ({', '.join(sorted(set(rejected)))})"
            if self._recover_timed_out(why):
                return None
            if not self._stop_acked:  # repeat the stop every period until the robot acknowledges it
                self._send(EStopMsg(self._next_seq(), self._clock(), EStopReason.WATCHDOG))
                self.counts["estop_repeats"] += 1
                return None
        if state is LoopState.HOMING:
            self._homing_retry()
            return None
        self._heartbeat()
        return None

    def _recover_timed_out(self: Controller, why: str) -> bool:
        """SAFE_STOP: whether no valid state has come for ``recover_timeout_s`` seconds since the stop (or the
        last valid state after it); if so the run ends, saying ``why``."""
        quiet_s = self._clock() - max(self._mode_since, self._last_valid_t)
        if quiet_s <= self.config.recover_timeout_s:
            return False
        self._finish(f"no valid state from the robot for {self.config.recover_timeout_s} s after a safe stop: {why}")
        return True

    def _check_startup_timeout(self: Controller, now: float) -> None:
        """WAIT_FRESH with no valid state yet since connecting: raise once ``startup_timeout_s`` has passed, naming
        what was received and why it was rejected."""
        if self._anchor is None and now - self._mode_since > self.config.startup_timeout_s:
            raise TimeoutError(
                f"no valid state from the robot on {self.robot_link.name} within "
                f"{self.config.startup_timeout_s} s of connecting; {self._startup_failure()}"
            )

    def _startup_failure(self: Controller) -> str:
        """What came from the robot before the startup timeout and why none of it was a valid state."""
        rejected = {k: v for k, v in sorted(self.counts.items()) if k.startswith(INVALID_STATE_PREFIXES)}
        if self.counts[NAN_STATES]:
            rejected[NAN_STATES] = self.counts[NAN_STATES]
        undecoded = {k: v for k, v in sorted(self.robot_link.decoder_errors().items()) if v}
        if not rejected and not undecoded:
            return "nothing came back: is the robot running and the port right?"
        parts = []
        if rejected:
            listed = ", ".join(f"{k} {v}" for k, v in rejected.items())
            parts.append(f"{sum(rejected.values())} states were received and rejected ({listed})")
        if undecoded:
            listed = ", ".join(f"{k} {v}" for k, v in undecoded.items())
            parts.append(f"frames failed to decode ({listed}): a wrong baud rate or another protocol?")
        if self.counts[f"malformed_{STATE_LENGTH}"]:
            fields = ", ".join(f"{name}[{size}]" for name, size in self.contract.state_fields)
            parts.append(
                f"the robot's states do not have the {self.contract.state_dim} values the contract expects "
                f"({fields}): wrong package for this robot; use a package trained for it"
            )
        return "; ".join(parts)

    # Link events ----------------------------------------------------------------------------------------------
    def _check_rate(self: Controller, msg: StateMsg) -> None:
        """Every new state times the robot's step (``StateRateCheck``); a robot stepping at another rate than the
        loop's ends the run: no check of a single state can catch it, and nothing the loop does can fix it."""
        # a HOMED state restarts the robot's period clock only as the answer to a HOME: one flagged anywhere else
        # (a robot that sets it on every state) must not switch the check off
        homed = bool(msg.flags & HOMED) and self.sm.state is LoopState.HOMING
        gaps = self.counts["robot_frame_gaps"]
        self.rate.add(msg.seq, msg.t_s, self.tick, homed, self.robot_link.sent_total, gaps)
        problem = self.rate.mismatch()
        if problem and self.sm.state is not LoopState.DONE:
            self.counts[STATE_RATE_MISMATCH] += 1
            logger.error("tick %d: %s; ending the run", self.tick, problem)
            self._finish(problem)

    def _on_reconnect(self: Controller) -> None:
        """The port was reopened: what the robot did while it was down is unknown (it may have rebooted, the arm may
        have moved), and the checker starts without an anchor. An episode under way is aborted and the robot held and
        re-homed, as after a confirmed restart, rather than planned with from the first state of the new link. The
        robot's numbering may have begun again: an e-stop in force is acknowledged by any state of the new link that
        reports it, and HOLD counts its fresh states anew."""
        self._stop_seq = None
        self._hold_count = 0
        if self.sm.state not in (LoopState.HOMING, LoopState.RUN):
            return
        self.counts[RECONNECT_REHOMES] += 1
        logger.warning("tick %d: the port was reopened in %s; holding to re-home", self.tick, self.sm.state.name)
        if self.episodes.current is not None:
            self.episodes.end(None, aborted=True)
        self.line.new_episode()
        self._fresh = self._after_event = None  # read before the reopen
        self._enter(LoopState.HOLD, "the port was reopened: the robot may have restarted; hold, then re-home")

    def _answers_stop(self: Controller, msg: StateMsg) -> bool:
        """Whether a state flagged ESTOP_ACTIVE acknowledges the e-stop now in force: only a state numbered after the
        newest one seen when the stop went out can. An older state replayed (or delayed) from an earlier stop says
        nothing about this one (counted as ``old_estop_acks``)."""
        if self._stop_seq is None or seq_newer(msg.seq, self._stop_seq):
            return True
        self.counts[OLD_ESTOP_ACKS] += 1
        return False
