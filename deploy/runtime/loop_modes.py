"""What the controller does with each state in each mode: the decisions of ``deploy.runtime.loop.Controller``.

numpy only (robot side). ``ModeRules`` decides, for each message read, each fresh state (or a period without one),
what to command given the loop's mode (``state_machine.LoopState``); it asks the controller's parts (``StateIntake``,
``Homing``, ``ResetHistory``, ``EpisodeTracker``, ``CommandPath``, ``StopLatch``) and acts through the controller's
actions (enter a mode; stop; record) and its ``Outbox`` (a command, a heartbeat, an e-stop). The modes with more to
do have their own handlers: RUN ``RunTicks`` (``loop_run.py``), HOMING and the start of an episode ``HomingTicks``
(``loop_homing.py``), RETRACT ``RetractTicks`` (``loop_retract.py``), SAFE_STOP ``SafeStopTicks``
(``loop_safe_stop.py``), the robot's own resets and a reopened port ``ResetTicks`` (``loop_resets.py``). Its own
state is the count of accepted states in HOLD. Per mode:

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
               -> RETRACT (a cell arm; ``RetractTicks``) or the next one; the e-stop reported active -> SAFE_STOP;
               a HOMED state no HOME awaits (the robot homed by itself) or a confirmed restart -> HOLD, the episode
               aborted, re-home; more than
               ``max_robot_resets`` of those within ``robot_reset_window_s`` -> SAFE_STOP and DONE
    RETRACT    toward home through the filter and the barrier (``Retraction``), then the next episode as after RUN;
               the e-stop reported active -> SAFE_STOP; a HOMED state no HOME awaits -> HOLD, re-home
    (HOLD, HOMING, RUN, RETRACT) an implausible, non-finite or malformed state -> hold and count; the stops
               ``StateIntake.reject`` calls for (in a row, too often, not following, stale)
               -> SAFE_STOP
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from deploy.contract import FLOAT32_MAX
from deploy.runtime.diagnostics import NAN_STATES, startup_failure
from deploy.runtime.homing import ROUND_TRIP_UNMEASURED
from deploy.runtime.loop_homing import HomingTicks
from deploy.runtime.loop_resets import ResetTicks
from deploy.runtime.loop_retract import RetractTicks
from deploy.runtime.loop_run import RunTicks
from deploy.runtime.loop_safe_stop import ESTOP_ACTIVE, ESTOP_FROM_ROBOT, SafeStopTicks
from deploy.runtime.safety import IMPLAUSIBLE_STATE, NAN_STATE, POLICY_FAULT
from deploy.runtime.state_check import Verdict
from deploy.runtime.state_intake import HOMED
from deploy.runtime.state_machine import LoopState
from deploy.runtime.tick_record import EMPTY, TickRecord
from deploy.wire import ErrorMsg, EStopMsg, Message, StateMsg

if TYPE_CHECKING:
    from deploy.runtime.loop import Controller

logger = logging.getLogger(__name__)

MOVING_MODES = (LoopState.RUN, LoopState.RETRACT)  # modes that send motion commands (through the filter)
ACTIVE_MODES = (LoopState.WAIT_FRESH, LoopState.HOLD, LoopState.HOMING, *MOVING_MODES)  # a robot e-stop stops these
CHECKED_MODES = (LoopState.HOLD, LoopState.HOMING, *MOVING_MODES)  # modes where a bad state costs a held tick
HOMING_MODES = (LoopState.HOMING, *MOVING_MODES)  # modes in which a HOMED state answers (or not) this episode's HOME
MALFORMED_STATE = "malformed_state"  # reason of a tick whose states were all dropped at decode (state_frames.py)
ESTOP_ACTIVE_IN_RUN = "robot_estop_active_in_run"  # count: the robot reported its e-stop latched while in RUN
ROUND_TRIP_OUTLIERS = "round_trip_outliers"  # count: line round trips longer than watchdog_stop_s, not sampled
NON_FINITE_STATE = "non_finite"  # verdict kind of a state with a NaN/inf value (as float32); counted as ``nan_states``
STATE_RATE_MISMATCH = "state_rate_mismatch"  # count: the run ended because the robot steps at another rate


def finite_as_float32(values: list[float]) -> bool:
    """Every value is finite as float32, which the policy takes (a NaN compares False). On Python floats, with
    ``map``: a state's dozen values cost less than numpy's three calls on a tick that starts cold
    (``benchmarks/cold_tick.py``)."""
    return all(map(FLOAT32_MAX.__ge__, map(abs, values)))


class ModeRules:
    """The per-mode decisions (module docstring), acting through ``controller``'s actions.

    :param controller: the controller whose parts are asked and whose actions are used.
    """

    def __init__(self, controller: Controller) -> None:
        self.ctl = controller
        self.run = RunTicks(controller)
        self.stopped = SafeStopTicks(controller)
        self.hold_count = 0  # accepted states in a row in HOLD
        self.homing = HomingTicks(controller)
        self.resets = ResetTicks(controller)
        self.retract = RetractTicks(controller, self)

    # A fresh state arrived --------------------------------------------------------------------------------------
    def on_state(self, t_in: float, msg: StateMsg) -> TickRecord | None:
        ctl = self.ctl
        finite = finite_as_float32(msg.state.tolist())
        if not finite:
            ctl.counts[NAN_STATES] += 1
        verdict = ctl.intake.check(msg, t_in, ctl.robot_link.sent_total) if finite else Verdict(False, NON_FINITE_STATE)
        if msg.flags & ESTOP_ACTIVE:
            ctl.latch.acknowledge_if(msg.seq)
        state = ctl.sm.state
        if msg.flags & ESTOP_FROM_ROBOT and state in ACTIVE_MODES:
            ctl.safe_stop("robot reports an e-stop", send_estop=False)
            return None
        if msg.flags & ESTOP_ACTIVE and state in MOVING_MODES:  # a latched stop: our commands are not executed
            ctl.counts[ESTOP_ACTIVE_IN_RUN] += 1
            ctl.safe_stop(
                f"the robot reports its e-stop active in {state.name}: it executes no command; episode aborted"
            )
            return None
        if state is LoopState.SAFE_STOP:
            if not self.stopped.on_state(msg, verdict):
                return None
            self.hold_count = 0
            return self._hold_tick(msg, verdict)
        if state is LoopState.WAIT_FRESH:
            if not verdict.accepted:
                self.check_startup_timeout()  # invalid states count as silence
                ctl.outbox.heartbeat()
                return None
            ctl.enter(LoopState.HOLD, "fresh state")
            self.hold_count = 0
            return self._hold_tick(msg, verdict)
        if msg.flags & HOMED and state in HOMING_MODES and not self.resets.asked_for(state, verdict):
            self.hold_count = 0
            if state is LoopState.RETRACT:
                return self.retract.homed_by_itself(msg)
            return self.resets.unrequested_home(msg)
        if verdict.restart:
            self.hold_count = 0
            return self.resets.restart(msg)
        if not verdict.accepted:
            reasons = (IMPLAUSIBLE_STATE, f"implausible_{verdict.kind}") if finite else (NAN_STATE,)
            return self.rejected_tick(msg, reasons)
        ctl.intake.count_accepted()
        if state is LoopState.HOLD:
            return self._hold_tick(msg, verdict)
        if state is LoopState.HOMING:
            return self._policy_tick(t_in, msg) if self.homing.on_state(t_in, msg) else None
        if state is LoopState.RETRACT:
            return self.retract.on_state(t_in, msg)
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
    def _hold_tick(self, msg: StateMsg, verdict: Verdict) -> TickRecord:
        """HOLD: answer with the hold; after ``hold_ticks`` accepted states in a row, and once the round trip that
        sizes the wait for a HOME's answer is known, home for the next episode."""
        ctl = self.ctl
        self.hold_count = self.hold_count + 1 if verdict.accepted else 0
        ctl.outbox.command(ctl.hold)
        if self.hold_count >= ctl.config.hold_ticks and self._round_trip_known(msg):
            self.next_episode()
        return ctl.record(msg, EMPTY, ctl.hold, ctl.hold, (), float("nan"), False)

    def next_episode(self) -> None:
        """HOME for the next episode (``HomingTicks``); a cell arm whose partner's report is stale (or, starting
        together, whose partner has not ended its episode yet) holds instead: nothing moves while the partner is stale
        (``CommandPath.may_home``), and HOLD asks again. With no goal left
        the run ends whatever the partner: ending moves nothing (a partner that already ended is stale for good)."""
        ctl = self.ctl
        if ctl.path.may_home() or not ctl.episodes.has_next():
            self.homing.start_episode()
            return
        if ctl.sm.state is not LoopState.HOLD:
            ctl.enter(LoopState.HOLD, "the partner is stale or still in its episode: hold before the next HOME")
        self.hold_count = 0

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
        """RUN, on an accepted state: end a full episode (then retract, or the next one), else ask the policy,
        filter, send (``RunTicks``)."""
        ctl = self.ctl
        episodes = ctl.episodes
        if episodes.full:
            episodes.end(msg.state, aborted=False)
            return self.retract.begin(t_in, msg)
        if ended := ctl.intake.episode_end_reason():  # the task cannot go on (the block fell off the table)
            ctl.interventions.add((ended,))
            episodes.end(msg.state, aborted=True, reason=ended)
            return self.retract.begin(t_in, msg)
        return self.run.on_state(t_in, msg)

    # No fresh state this period ---------------------------------------------------------------------------------
    def on_silence(self) -> TickRecord | None:
        ctl = self.ctl
        state = ctl.sm.state
        now = ctl.clock()
        rejected = ctl.robot_link.take_rejected()
        if rejected and state in CHECKED_MODES:  # states came but were malformed: hold and count, like implausible
            return self.rejected_tick(None, (MALFORMED_STATE, *sorted({f"malformed_{r}" for r in rejected})))
        if state in MOVING_MODES:
            return self.run.on_silence(now)
        if state is LoopState.HOLD:
            self.hold_count = 0
            if now - ctl.intake.last_valid_t > ctl.limits.watchdog_stop_s:
                ctl.safe_stop("watchdog while holding")
                return None
        if state is LoopState.WAIT_FRESH:
            self.check_startup_timeout()
        if state is LoopState.SAFE_STOP:
            self.stopped.on_silence(rejected)
            return None
        if state is LoopState.HOMING:
            self.homing.wait()
            return None
        ctl.outbox.heartbeat()
        return None

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
        if not stop and ctl.sm.state is LoopState.RUN and (stop := self.run.stalled_policy(ctl.clock())):
            ctl.interventions.add((POLICY_FAULT,))
        if stop:
            ctl.safe_stop(stop)
            return ctl.record(msg, EMPTY, ctl.hold, ctl.hold, reasons, float("nan"), True)
        ctl.outbox.command(ctl.hold)
        return ctl.record(msg, EMPTY, ctl.hold, ctl.hold, reasons, float("nan"), False)

    # Link events ----------------------------------------------------------------------------------------------
    def on_message(self, msg: Message, t: float) -> None:
        """A message read at ``t`` (seconds): a state waits in the inbox for its tick (and times the robot's step);
        a robot e-stop stops at once; an error is counted by its code."""
        ctl = self.ctl
        if isinstance(msg, StateMsg):
            if ctl.inbox.put(msg, t):
                self.check_rate(msg)
        elif isinstance(msg, EStopMsg):
            ctl.counts["robot_estops"] += 1
            if ctl.sm.state in ACTIVE_MODES:
                ctl.safe_stop(f"robot e-stop (reason {msg.reason})", send_estop=False)
        elif isinstance(msg, ErrorMsg):
            ctl.robot_errors[msg.code] += 1
        else:
            ctl.counts[f"ignored_{type(msg).__name__}"] += 1

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
        """The port was reopened (``ResetTicks.on_reconnect``); HOLD counts its fresh states anew."""
        self.hold_count = 0
        self.resets.on_reconnect()
