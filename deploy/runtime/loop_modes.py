"""What the controller does with each state in each mode: the decisions of ``deploy.runtime.loop.Controller``.

numpy only (robot side). ``ModeRules`` decides, for each fresh state (or a period without one), what to command given
the loop's mode (``state_machine.LoopState``); it asks the controller's parts (``StateIntake``, ``Homing``,
``ResetHistory``, ``EpisodeTracker``, ``CommandPath``, ``StopLatch``) and acts through the controller's actions
(send a command, a heartbeat, an e-stop; enter a mode; stop; record). Its own state is the count of accepted states
in HOLD. Per mode:

    any mode   robot e-stop flag -> SAFE_STOP; the state is checked first (``StateIntake.check``); a state with a
               value that is NaN/inf once cast to float32 (what the policy takes) is invalid, never checked
    SAFE_STOP  repeat the e-stop until the robot acknowledges it; then, on an accepted state, WAIT_FRESH -> HOLD;
               no valid state for ``recover_timeout_s`` since the stop or the last valid state -> DONE; a robot that
               keeps answering without acknowledging for ``stop_ack_timeout_s`` (timed from its first state after the
               stop or after a silence: ``StopLatch``) -> DONE
    WAIT_FRESH an accepted state -> HOLD; none within ``startup_timeout_s`` of connecting -> TimeoutError naming
               what was received and why it was rejected
    HOLD       hold; ``hold_ticks`` accepted states in a row and a measured round trip -> HOMING (the next episode;
               a cell arm also waits for a fresh partner report: ``CommandPath.may_home``)
    HOMING     the accepted HOMED state without ESTOP_ACTIVE -> RUN; no answer after ``Homing.retry_ticks()`` ->
               resend HOME; ``max_home_retries`` resent in a row without an answer -> SAFE_STOP
    RUN        policy -> safety filter -> command (``CommandPath``, planned from the checker's bounds); a full episode
               -> the next one; the e-stop reported active -> SAFE_STOP; a HOMED state no HOME awaits (the robot
               homed by itself) or a confirmed restart -> HOLD, the episode aborted, re-home; more than
               ``max_robot_resets`` of those within ``robot_reset_window_s`` -> SAFE_STOP and DONE
    (HOLD, HOMING, RUN) an implausible, non-finite or malformed state -> hold and count; the stops
               ``StateIntake.reject`` calls for (in a row, too often, not following, stale)
               -> SAFE_STOP
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

import numpy as np

from deploy.contract import FLOAT32_MAX
from deploy.runtime.diagnostics import NAN_STATES, homing_failure, startup_failure
from deploy.runtime.homing import HOMED_WITH_ESTOP, LATE_HOME_ANSWERS, ROUND_TRIP_UNMEASURED, HomeWait
from deploy.runtime.robot_resets import ROBOT_RESET_STORMS
from deploy.runtime.safety import IMPLAUSIBLE_STATE, NAN_STATE, ROBOT_RESTART, UNREQUESTED_HOME
from deploy.runtime.state_check import Verdict
from deploy.runtime.state_intake import HOMED, OFF_HOME_REASON
from deploy.runtime.state_machine import LoopState
from deploy.runtime.tick_record import EMPTY, TickRecord
from deploy.wire import HOLD_SEQ, StateFlags, StateMsg

if TYPE_CHECKING:
    from deploy.runtime.loop import Controller

logger = logging.getLogger(__name__)

ESTOP_ACTIVE = int(StateFlags.ESTOP_ACTIVE)  # as plain ints: a tick tests several bits
ESTOP_FROM_ROBOT = int(StateFlags.ESTOP_FROM_ROBOT)
ACTIVE_MODES = (LoopState.WAIT_FRESH, LoopState.HOLD, LoopState.HOMING, LoopState.RUN)  # a robot e-stop stops these
CHECKED_MODES = (LoopState.HOLD, LoopState.HOMING, LoopState.RUN)  # modes where a bad state costs a held tick
HOMING_MODES = (LoopState.HOMING, LoopState.RUN)  # modes in which a HOMED state answers (or not) this episode's HOME
MALFORMED_STATE = "malformed_state"  # reason of a tick whose states were all dropped at decode (state_frames.py)
NON_FINITE_OBSERVATION = "non_finite_observation"  # reason of a tick whose float32 observation held NaN/inf
ESTOP_ACTIVE_IN_RUN = "robot_estop_active_in_run"  # count: the robot reported its e-stop latched while in RUN
ROUND_TRIP_OUTLIERS = "round_trip_outliers"  # count: line round trips longer than watchdog_stop_s, not sampled
ESTOP_NOT_ACKNOWLEDGED = "estop_not_acknowledged"  # count: the robot kept answering a safe stop without acknowledging
NON_FINITE_STATE = "non_finite"  # verdict kind of a state with a NaN/inf value (as float32); counted as ``nan_states``
RECONNECT_REHOMES = "reconnect_rehomes"  # count: episodes aborted and re-homed because the port was reopened
STATE_RATE_MISMATCH = "state_rate_mismatch"  # count: the run ended because the robot steps at another rate
POLICY_WAIT_FLOOR_PERIODS = 1.0  # the least a tick waits for the policy (control periods)
UNREQUESTED_HOMES = "unrequested_homes"  # count: HOMED in RUN with no HOME awaiting an answer (episode aborted)


class ModeRules:
    """The per-mode decisions (module docstring), acting through ``controller``'s actions.

    :param controller: the controller whose parts are asked and whose actions are used.
    """

    def __init__(self, controller: Controller) -> None:
        self.ctl = controller
        self.hold_count = 0  # accepted states in a row in HOLD
        self._homing_faults_at_start = (0, 0)  # ``_homing_faults()`` when the episode's first HOME went out

    # A fresh state arrived --------------------------------------------------------------------------------------
    def on_state(self, t_in: float, msg: StateMsg) -> TickRecord | None:
        ctl = self.ctl
        finite = bool((np.abs(msg.state) <= FLOAT32_MAX).all())  # finite as float32 (a NaN compares False)
        if not finite:
            ctl.counts[NAN_STATES] += 1
        verdict = ctl.intake.check(msg, t_in, ctl.robot_link.sent_total) if finite else Verdict(False, NON_FINITE_STATE)
        if msg.flags & ESTOP_ACTIVE:
            ctl.latch.acknowledge_if(msg.seq)
        state = ctl.sm.state
        if msg.flags & ESTOP_FROM_ROBOT and state in ACTIVE_MODES:
            ctl.safe_stop("robot reports an e-stop", send_estop=False)
            return None
        if msg.flags & ESTOP_ACTIVE and state is LoopState.RUN:  # a latched stop: our commands are not executed
            ctl.counts[ESTOP_ACTIVE_IN_RUN] += 1
            ctl.safe_stop("the robot reports its e-stop active in RUN: it executes no command; episode aborted")
            return None
        if state is LoopState.SAFE_STOP:
            return self._safe_stop_tick(msg, verdict)
        if state is LoopState.WAIT_FRESH:
            if not verdict.accepted:
                self.check_startup_timeout()  # invalid states count as silence
                ctl.heartbeat()
                return None
            ctl.enter(LoopState.HOLD, "fresh state")
            self.hold_count = 0
            return self._hold_tick(msg, verdict)
        if msg.flags & HOMED and state in HOMING_MODES and not self._home_asked_for(state, verdict):
            return self._unrequested_home_tick(msg)
        if verdict.restart:
            ctl.counts["robot_restarts"] += 1
            logger.warning("tick %d: the robot restarted (its clock and sequence began again); re-homing", ctl.tick)
            return self._abort_to_hold(msg, ROBOT_RESTART, "the robot restarted: hold, then re-home")
        if not verdict.accepted:
            reasons = (IMPLAUSIBLE_STATE, f"implausible_{verdict.kind}") if finite else (NAN_STATE,)
            return self.rejected_tick(msg, reasons)
        ctl.intake.count_accepted()
        if state is LoopState.HOLD:
            return self._hold_tick(msg, verdict)
        if state is LoopState.HOMING:
            if msg.flags & HOMED and not msg.flags & ESTOP_ACTIVE:
                ctl.homing.answered(t_in)
                ctl.enter(LoopState.RUN, f"episode {ctl.episodes.current.index} starts")  # type: ignore[union-attr]
                return self._policy_tick(t_in, msg)
            if msg.flags & HOMED:  # homed, but its e-stop is latched: it would execute no command of the episode
                ctl.counts[HOMED_WITH_ESTOP] += 1
                logger.warning("tick %d: the robot reports HOMED with its e-stop active; not starting", ctl.tick)
            self.homing_wait()
            return None
        return self._policy_tick(t_in, msg)

    def note_accepted(self) -> None:
        """Bookkeeping of the last accepted state that its command need not wait for (run after the tick's answer
        went out): the round trip it reports and the robot's own period jitter."""
        ctl = self.ctl
        if ctl.intake.to_note is None:
            return
        t_in, msg, verdict = ctl.intake.to_note
        ctl.intake.to_note = None
        if verdict.clock_corrected:
            ctl.counts["clock_offset_corrections"] += 1
        round_trip = ctl.line.round_trip_s(msg.pending, t_in)
        if round_trip is not None and round_trip > ctl.limits.watchdog_stop_s:
            # longer than the watchdog lets a state be late: no round trip of a link the loop runs on, but a line
            # that names an old command late (one such sample stretched the wait for a HOME's answer to 44 s)
            ctl.counts[ROUND_TRIP_OUTLIERS] += 1
        elif round_trip is not None and not ctl.robot_link.arrived_after_loss(msg.seq):  # a lost answer: the wait
            ctl.homing.note_round_trip(round_trip)
        ctl.stats.on_robot_state(msg.seq, msg.t_s, restarted=bool(msg.flags & HOMED))

    # Per mode -----------------------------------------------------------------------------------------------------
    def _safe_stop_tick(self, msg: StateMsg, verdict: Verdict) -> None:
        """SAFE_STOP: repeat the e-stop until acknowledged; recover once acknowledged and the robot answers again."""
        ctl = self.ctl
        if not verdict.accepted and self._recover_timed_out(f"its states were invalid (last: {verdict.kind})"):
            return None
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
                return None
            ctl.send_estop()
            return None
        if verdict.accepted and not msg.flags & ESTOP_FROM_ROBOT and ctl.config.recover:
            ctl.enter(LoopState.WAIT_FRESH, "the robot acknowledged the stop and answers again")
            ctl.enter(LoopState.HOLD, "fresh state")
            self.hold_count = 0
            return self._hold_tick(msg, verdict)
        ctl.heartbeat()
        return None

    def _hold_tick(self, msg: StateMsg, verdict: Verdict) -> TickRecord:
        """HOLD: answer with the hold; after ``hold_ticks`` accepted states in a row, and once the round trip that
        sizes the wait for a HOME's answer is known, home for the next episode."""
        ctl = self.ctl
        self.hold_count = self.hold_count + 1 if verdict.accepted else 0
        ctl.send_command(ctl.hold)
        if self.hold_count >= ctl.config.hold_ticks and self._round_trip_known(msg):
            self.start_episode()
        return ctl.record(msg, EMPTY, ctl.hold, ctl.hold, (), float("nan"), False)

    def _round_trip_known(self, msg: StateMsg) -> bool:
        ctl = self.ctl
        waited_s = ctl.clock() - ctl.mode_since
        known = ctl.homing.round_trip_known(
            bool(msg.pending), bool(msg.flags & ESTOP_ACTIVE), waited_s, ctl.limits.watchdog_stop_s
        )
        measured = ctl.homing.round_trips or not msg.pending or msg.flags & ESTOP_ACTIVE
        if known and not measured:
            ctl.counts[ROUND_TRIP_UNMEASURED] += 1
        return known

    def _policy_tick(self, t_in: float, msg: StateMsg) -> TickRecord | None:
        """RUN, on an accepted state: build the observation, ask the policy, filter, send (or end the episode)."""
        ctl = self.ctl
        episodes = ctl.episodes
        if episodes.full:
            episodes.end(msg.state, aborted=False)
            self.start_episode()
            return None
        if episodes.steps and msg.pending and msg.pending[-1] == HOLD_SEQ:
            ctl.counts["robot_held"] += 1  # our previous command was lost or reached the robot after its step
        if len(msg.pending) > ctl.spec.delay_range[1]:
            ctl.counts["line_longer_than_spec"] += 1  # the robot's delay grew past its spec: recalibrate
        ctl.line.sync(msg.pending)
        flat = ctl.path.observation(msg.state, episodes.current.goal)  # type: ignore[union-attr]
        if not np.isfinite(flat).all():  # what the policy would get, after the float32 cast
            # the state passed its checks, so a goal beyond float32's range: no later tick can do better
            ctl.counts["non_finite_observations"] += 1
            ctl.interventions.add((NON_FINITE_OBSERVATION,))
            ctl.safe_stop("the observation is not finite as float32 (a goal beyond float32's range?)")
            return ctl.record(msg, flat, ctl.hold, ctl.hold, (NON_FINITE_OBSERVATION,), float("nan"), True)
        position = msg.state[ctl.position_slice]
        age = ctl.clock() - ctl.intake.last_valid_t
        # until the tick's deadline, and at least a period: a state read at the deadline still gets its answer, and a
        # busy machine's late thread wake-up is no policy fault
        wait_s = max(ctl.deadline - ctl.clock(), POLICY_WAIT_FLOOR_PERIODS * ctl.period_s)
        proposal = ctl.path.propose(flat, ctl.intake.bounds, position, age, wait_s)  # type: ignore[arg-type]
        guard = ctl.path.guard
        failing = guard.failing_for(ctl.clock())
        if failing >= ctl.config.policy_fault_stop_s:
            ctl.interventions.add(proposal.result.reasons)
            ctl.safe_stop(f"the policy failed ({guard.last_fault}) for {failing:.3f} s")
            return ctl.record(
                msg, flat, proposal.proposed, ctl.hold, proposal.result.reasons, float("nan"), True, proposal.policy_id
            )
        return ctl.apply(proposal.result, t_in, msg, flat, proposal.proposed, True, proposal.policy_id)

    # No fresh state this period ---------------------------------------------------------------------------------
    def on_silence(self) -> TickRecord | None:
        ctl = self.ctl
        state = ctl.sm.state
        now = ctl.clock()
        rejected = ctl.robot_link.take_rejected()
        if rejected and state in CHECKED_MODES:  # states came but were malformed: hold and count, like implausible
            return self.rejected_tick(None, (MALFORMED_STATE, *sorted({f"malformed_{r}" for r in rejected})))
        if state is LoopState.RUN:
            age = now - ctl.intake.last_valid_t
            if age <= ctl.limits.watchdog_hold_s:
                ctl.heartbeat()  # a late frame is no fault yet; a lock-step robot whose answer was lost replies
                return None
            position = ctl.intake.anchor.state[ctl.position_slice]  # type: ignore[union-attr]
            result = ctl.path.filtered(ctl.hold, ctl.intake.bounds, position, age)
            return ctl.apply(result, None, None, EMPTY, ctl.hold, False)
        if state is LoopState.HOLD:
            self.hold_count = 0
            if now - ctl.intake.last_valid_t > ctl.limits.watchdog_stop_s:
                ctl.safe_stop("watchdog while holding")
                return None
        if state is LoopState.WAIT_FRESH:
            self.check_startup_timeout()
        if state is LoopState.SAFE_STOP:
            repeats = ctl.inbox.repeats_since_fresh
            why = "it stayed silent"
            if repeats:
                why = (
                    f"it sent only repeats of one state ({repeats} with the same sequence number: a frozen sensor or a "
                    "stuck sender)"
                )
            if rejected:
                why = f"it sent only malformed states ({', '.join(sorted(set(rejected)))})"
            if self._recover_timed_out(why):
                return None
            if not ctl.latch.acked:  # repeat the stop every period until the robot acknowledges it
                ctl.send_estop()
                return None
        if state is LoopState.HOMING:
            self.homing_wait()
            return None
        ctl.heartbeat()
        return None

    def _recover_timed_out(self, why: str) -> bool:
        """SAFE_STOP: whether no valid state has come for ``recover_timeout_s`` since the stop (or the last valid state
        after it); if so the run ends, saying ``why``."""
        ctl = self.ctl
        quiet_s = ctl.clock() - max(ctl.mode_since, ctl.intake.last_valid_t)
        if quiet_s <= ctl.config.recover_timeout_s:
            return False
        ctl.finish(f"no valid state from the robot for {ctl.config.recover_timeout_s} s after a safe stop: {why}")
        return True

    def check_startup_timeout(self) -> None:
        """WAIT_FRESH with no valid state yet since connecting: raise once ``startup_timeout_s`` has passed, naming
        what was received and why it was rejected."""
        ctl = self.ctl
        if ctl.intake.anchor is None and ctl.clock() - ctl.mode_since > ctl.config.startup_timeout_s:
            raise TimeoutError(
                f"no valid state from the robot on {ctl.robot_link.name} within {ctl.config.startup_timeout_s} s of "
                f"connecting; {startup_failure(ctl.counts, ctl.robot_link.decoder_errors(), ctl.contract)}"
            )

    # Rejections and resets ------------------------------------------------------------------------------------------
    def rejected_tick(self, msg: StateMsg | None, reasons: tuple[str, ...]) -> TickRecord:
        """The state failed its check, was non-finite or malformed: never plan with it. Hold and count; the stop
        ``StateIntake.reject`` calls for, if any."""
        ctl = self.ctl
        self.hold_count = 0
        ctl.interventions.add(reasons)
        stop = ctl.intake.reject(reasons[-1], ctl.clock(), ctl.limits.watchdog_stop_s)
        if stop:
            ctl.safe_stop(stop)
            return ctl.record(msg, EMPTY, ctl.hold, ctl.hold, reasons, float("nan"), True)
        ctl.send_command(ctl.hold)
        return ctl.record(msg, EMPTY, ctl.hold, ctl.hold, reasons, float("nan"), False)

    def _home_asked_for(self, state: LoopState, verdict: Verdict) -> bool:
        asked, late = self.ctl.homing.asked_for(state is LoopState.RUN, verdict.accepted)
        if late:
            self.ctl.counts[LATE_HOME_ANSWERS] += 1  # sent before any command of the episode: nothing was applied
        return asked

    def _unrequested_home_tick(self, msg: StateMsg) -> TickRecord:
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
        return self._abort_to_hold(msg, UNREQUESTED_HOME, f"the robot homed by itself in episode {index}: re-home")

    def _abort_to_hold(self, msg: StateMsg, reason: str, why: str) -> TickRecord:
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
        if ctl.episodes.current is not None:
            ctl.episodes.end(None, aborted=True)
        ctl.line.new_episode()
        ctl.intake.new_episode()
        if ctl.sm.state is not LoopState.HOLD:
            ctl.enter(LoopState.HOLD, why)
        self.hold_count = 0
        ctl.send_command(ctl.hold)
        return ctl.record(msg, EMPTY, ctl.hold, ctl.hold, (reason,), float("nan"), False)

    # Homing -------------------------------------------------------------------------------------------------------
    def start_episode(self) -> None:
        ctl = self.ctl
        if not ctl.path.may_home():  # a cell arm whose partner is stale holds (HOLD tries again)
            if ctl.sm.state is not LoopState.HOLD:
                ctl.enter(LoopState.HOLD, "the partner's position is stale: hold before the next HOME")
            self.hold_count = 0
            return
        episode = ctl.episodes.start_next()
        if episode is None:
            aborted = sum(result.aborted for result in ctl.episodes.results)
            if not aborted:
                ctl.finish("all goals served")
            else:  # "served" would hide that some goals were never reached for (a link failure, a safe stop)
                served = len(ctl.episodes.results) - aborted
                ctl.finish(f"all goals taken: {served} served, {aborted} aborted (see the episodes' results)")
            return
        ctl.line.new_episode()
        ctl.path.note_sent(ctl.hold.copy())
        ctl.homing.new_episode()
        self._homing_faults_at_start = self._homing_faults()
        ctl.enter(LoopState.HOMING, f"episode {episode.index}: home (seed {episode.seed})")
        ctl.send_home()

    def _homing_faults(self) -> tuple[int, int]:
        counts = self.ctl.counts
        return counts[HOMED_WITH_ESTOP], counts[OFF_HOME_REASON]

    def homing_wait(self) -> None:
        """No HOMED state yet (or one with the e-stop active): wait, resend the HOME, or stop."""
        ctl = self.ctl
        wait = ctl.homing.wait(ctl.tick)
        if wait is HomeWait.WAIT:
            ctl.heartbeat()
            return
        if wait is HomeWait.GIVE_UP:
            ctl.counts["homing_failures"] += 1
            start = self._homing_faults_at_start
            latched, off_home = (now - before for now, before in zip(self._homing_faults(), start, strict=True))
            hint = homing_failure(latched, off_home, ctl.spec, ctl.intake.checker, ctl.inbox.repeats_since_fresh)
            ctl.safe_stop(
                f"the robot never reported HOMED: {ctl.homing.retries + 1} HOMEs for episode "
                f"{ctl.episodes.current.index} went unanswered; check the robot's homing{hint}"  # type: ignore[union-attr]
            )
            return
        ctl.homing.resent()
        ctl.counts["home_retries"] += 1
        ctl.send_home()

    # Link events ----------------------------------------------------------------------------------------------
    def check_rate(self, msg: StateMsg) -> None:
        """Every new state times the robot's step (``StateRateCheck``); a robot stepping at another rate than the
        loop's ends the run: no check of a single state can catch it, and nothing the loop does can fix it."""
        ctl = self.ctl
        # a HOMED state restarts the robot's period clock only as the answer to a HOME: one flagged anywhere else
        # (a robot that sets it on every state) must not switch the check off
        homed = bool(msg.flags & HOMED) and ctl.sm.state is LoopState.HOMING
        rate = ctl.inbox.rate
        rate.add(msg.seq, msg.t_s, ctl.tick, homed, ctl.robot_link.sent_total, ctl.counts["robot_frame_gaps"])
        problem = rate.mismatch()
        if problem and ctl.sm.state is not LoopState.DONE:
            ctl.counts[STATE_RATE_MISMATCH] += 1
            logger.error("tick %d: %s; ending the run", ctl.tick, problem)
            ctl.finish(problem)

    def on_reconnect(self) -> None:
        """The port was reopened: what the robot did while it was down is unknown. An episode under way is aborted
        and the robot held and re-homed. The robot's numbering may have begun again: an e-stop in force is
        acknowledged by any state of the new link that reports it, and HOLD counts its fresh states anew."""
        ctl = self.ctl
        ctl.latch.forget_numbering()
        self.hold_count = 0
        if ctl.sm.state not in (LoopState.HOMING, LoopState.RUN):
            return
        ctl.counts[RECONNECT_REHOMES] += 1
        logger.warning("tick %d: the port was reopened in %s; holding to re-home", ctl.tick, ctl.sm.state.name)
        if ctl.episodes.current is not None:
            ctl.episodes.end(None, aborted=True)
        ctl.line.new_episode()
        ctl.inbox.clear()  # read before the reopen
        ctl.enter(LoopState.HOLD, "the port was reopened: the robot may have restarted; hold, then re-home")
