"""The robot controller: a deadline-paced loop from robot state to safe command, over the wire link.

One period = one tick. The loop's clock is ``next_tick += period`` (never ``sleep(period)`` after compute): in
each period it waits on the link for the robot's next fresh state until the period's deadline, answers it at once
(state frame in -> command frame out is the tick latency), then keeps reading until the deadline. A state that
arrives after this period's command waits for the next tick, so the loop never runs faster than the period.

The loop believes nothing it has not checked. Per fresh state:

    frame    dropped at decode if it cannot be a state of this robot (RobotLink, state_frames.py)
    check    StateChecker (state_check.py): time, sequence, envelope, speed, motion the commands explain
             -> an implausible state is held and counted; ``max_implausible_states`` in a row -> safe stop;
                a confirmed restart of the robot's clock and sequence -> hold, then re-home
    in RUN:
    history  <- the robot's reported delay line (StateMsg.pending) mapped to the commands this loop sent
    obs      =  contract.flat_observation(state, history, goal)   (= flatten(build(...)))
    proposed =  policy(obs)                    (PolicyGuard: NaN/raise/overrun held; too long -> safe stop)
    sent     =  filter_action(position bounds, in flight, proposed, previous, state age, limits)

The state age is measured from when the robot made the state (its stamp plus the checker's clock offset, taken
from accepted states only), so one bad stamp cannot age every later state. A period with no fresh state sends a
heartbeat, or the hold once the state is older than ``watchdog_hold_s``; past ``watchdog_stop_s`` the loop stops
safely. In safe stop the e-stop repeats every period until the robot acknowledges it (ESTOP_ACTIVE); then, when
the robot answers again: fresh states -> hold -> home -> run. The state machine is in ``state_machine.py``,
episodes in ``episodes.py``; the stop command goes out in ``finally`` and repeats until acknowledged.
"""

from __future__ import annotations

import gc
import logging
import math
import time
from collections import Counter, deque
from collections.abc import Callable
from typing import Any

import numpy as np

from deploy.contract import ObservationContract
from deploy.robot_spec import RobotSpec
from deploy.runtime.command_line import CommandLine
from deploy.runtime.episodes import EpisodeTracker
from deploy.runtime.goals import Episode, GoalSource
from deploy.runtime.loop_config import LoopConfig
from deploy.runtime.loop_states import ACTIVE_MODES, ESTOP_ACTIVE, HOMED, StateHandling
from deploy.runtime.policy_guard import PolicyGuard
from deploy.runtime.realtime import enter_realtime
from deploy.runtime.rejection_window import RejectionWindow
from deploy.runtime.robot_link import RobotLink
from deploy.runtime.run_report import RunReport
from deploy.runtime.safety import (
    InterventionCounter,
    SafetyLimits,
)
from deploy.runtime.state_check import StateChecker, Verdict
from deploy.runtime.state_machine import LoopState, StateMachine
from deploy.runtime.state_rate import StateRateCheck
from deploy.runtime.tick_record import EMPTY, NO_EPISODE, TickRecord, check_policy_id
from deploy.runtime.ticklog import TickLogWriter
from deploy.runtime.timing import TickStats
from deploy.runtime.unreported_following import UnreportedFollowing
from deploy.wire import (
    DEFAULT_BAUDRATE,
    CommandMsg,
    ErrorMsg,
    EStopMsg,
    EStopReason,
    HeartbeatMsg,
    Link,
    Message,
    StateMsg,
    seq_newer,
)

logger = logging.getLogger(__name__)

Policy = Callable[[np.ndarray], np.ndarray]
MAX_STATES_PER_TICK = 2  # one command per tick; a second state only to answer a HOMED state without waiting
ROUND_TRIP_SAMPLES = 16  # HOME round trips remembered for the retry interval
# Flags that mark a moment (the state right after a HOME), not a level: such a state is never skipped for a newer one
EVENT_FLAGS = HOMED


class Controller(StateHandling):
    """The fixed-rate controller (see the module docstring).

    :param port: a port name / pyserial URL (opened in CONNECT, reopened after a port failure) or an open ``Link``.
    :param contract: the policy's observation/action contract.
    :param policy: float32 obs [1, D] -> float32 action [1, A]: an ``InferenceBackend`` or a ``PolicySlot``
        (read once per tick, so a hot swap lands between ticks).
    :param spec: the robot spec: workspace, limits, gain bound, delay, noise, plausible speed.
    :param goals: the targets, one episode each.
    :param config: loop settings.
    :param ticklog: where every tick is appended (None: not logged).
    :param on_tick: called after every tick with (controller, record or None when nothing was commanded):
        monitoring and test hooks.
    :param clock: monotonic clock in seconds (the robot's timestamps need not share it).
    :param checker_class: the state checker (``StateChecker``; a benchmark swaps in one that accepts everything to
        measure what the checks cost).
    :param baudrate: line rate of a named serial port, bit/s (ignored by ptys, sockets and a given ``Link``).
    :param policy_id: the id the tick log records on the ticks a bare backend was asked (its package's
        ``manifest_sha256``, ``PolicyPackage.policy_id``); a ``PolicySlot`` names the id of each backend it holds.
    :param sleep: how the loop waits while the port is down (seconds, on ``clock``'s time base; a test clock
        passes its own).
    """

    def __init__(
        self,
        port: str | Link,
        contract: ObservationContract,
        policy: Policy | Any,
        spec: RobotSpec,
        goals: GoalSource,
        config: LoopConfig | None = None,
        ticklog: TickLogWriter | None = None,
        on_tick: Callable[[Controller, TickRecord | None], None] | None = None,
        clock: Callable[[], float] = time.monotonic,
        checker_class: type[StateChecker] = StateChecker,
        baudrate: int = DEFAULT_BAUDRATE,
        policy_id: str = "",
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.config = config or LoopConfig()
        limits = SafetyLimits.from_spec(spec, contract)
        if goals.goal_dim != contract.goal_dim:
            raise ValueError(f"goals are {goals.goal_dim}-D but the contract's goal is {contract.goal_dim}-D")
        if contract.action_dim < limits.position_dims:
            raise ValueError(f"the contract's {contract.action_dim}-D action has no {limits.position_dims}-D move")
        self.contract = contract
        self.spec = spec
        self.limits = limits
        self.period_s = float(self.config.period_s or contract.control_period_s)
        self.ticklog = ticklog
        self.on_tick = on_tick
        self._clock = clock
        self.sm = StateMachine()
        self.stats = TickStats(self.period_s)
        self.interventions = InterventionCounter()
        self.counts: Counter[str] = Counter()
        self.robot_link = RobotLink(
            port, self.counts, self.config.reconnect_interval_s, clock, contract, baudrate, sleep
        )
        self.robot_errors: Counter[int] = Counter()
        self.episodes = EpisodeTracker(
            goals, slice(*contract.position_slice), self.config.success_radius_m, self.config.max_episode_steps
        )
        self.checker = checker_class(spec, contract, self.period_s, resync_states=self.config.resync_states)
        if spec.home_position_m is None:
            logger.warning(
                "robot spec %s has no home pose: a glitched HOMED state cannot be told from the arm at home, and the "
                "first command of each episode is planned from it; `robot-grpo calibrate` measures the home",
                spec.robot_id,
            )
        self.rate = StateRateCheck(self.period_s)
        self.guard = PolicyGuard(policy, contract.action_dim, self.period_s, clock, check_policy_id(policy_id))
        self.line = CommandLine(contract, spec.delay_range[1], self.counts, limits.position_dims)
        self.unreported = UnreportedFollowing(spec, contract, self.checker.follow_noise_m)  # robots without a line
        self.tick = 0
        self._pos = slice(*contract.position_slice)
        self._dims = limits.position_dims
        self._hold = contract.hold()
        self._previous = contract.hold()
        self._last_state_seq: int | None = None
        self._anchor: StateMsg | None = None  # the last accepted state
        self._anchor_sent_seq: int | None = None  # the newest command sent when the anchor was accepted
        self._bounds: tuple[np.ndarray, np.ndarray] | None = None  # where the gripper is, per the last check
        self._last_valid_t = -math.inf  # local time the newest accepted state was made (estimated)
        self._fresh: tuple[float, StateMsg] | None = None
        self._after_event: tuple[float, StateMsg] | None = None  # the newest state read after a waiting HOMED one
        self._repeats_since_fresh = 0  # states since the last new one that repeated its sequence number
        self._to_note: tuple[float, StateMsg, Verdict] | None = None  # accepted, its bookkeeping after the answer
        self._generation = 0
        self._window_start = 0.0
        self._next_tick = 0.0
        self._hold_count = 0
        self._implausible_run = 0
        self._rejections = RejectionWindow(self.config.rejection_window_states, self.config.max_rejected_in_window)
        self._home_tick = 0
        self._home_retries_run = 0  # HOMEs resent for the current episode without an answer
        self._robot_resets: deque[tuple[float, str]] = deque()  # (loop time, reason) of the recent robot resets
        self._homes_unanswered = 0  # HOMEs of the current episode whose HOMED answer has not come (resent included)
        self._homing_counts_at_start = (0, 0)  # Homing._homing_faults() when the current episode's first HOME went
        self._home_sent_t = 0.0
        self._round_trips: deque[float] = deque(maxlen=ROUND_TRIP_SAMPLES)
        self._mode_since = 0.0
        self._stop_acked = True
        self._stop_seq: int | None = None  # the newest robot state seen when the e-stop in force went out
        self._commanded = False
        self._stopped_episode: Episode | None = None  # the episode the last safe stop aborted in RUN (its record)

    # Run -----------------------------------------------------------------------------------------------------
    def run(self) -> RunReport:
        """Run until the goals are served, ``max_ticks``, or an error; the stop goes out in ``finally``."""
        restore_scheduler = enter_realtime(self.config.realtime_priority)
        try:
            self.robot_link.open()  # LinkError names the port if it cannot be opened
            if self.config.freeze_gc:  # before the first message: the robot's first answer must not wait for it
                gc.collect()
                gc.freeze()
            self._connect()
            self._next_tick = self._clock() + self.period_s
            while self.sm.state is not LoopState.DONE:
                self._run_tick()
                if self.config.max_ticks is not None and self.tick >= self.config.max_ticks:
                    self._finish("tick limit reached")
        finally:
            self._shutdown()
            if self.config.freeze_gc:
                gc.unfreeze()
            restore_scheduler()
        return self.report()

    def report(self) -> RunReport:
        return RunReport(
            episodes=list(self.episodes.results),
            timing=self.stats.summary(),
            interventions=self.interventions.as_dict(),
            counts=dict(self.counts),
            robot_errors=dict(self.robot_errors),
            decoder_errors=self.robot_link.decoder_errors(),
            transitions=list(self.sm.history),
            ticks=self.tick,
        )

    def _connect(self) -> None:
        self._mode_since = self._clock()
        self.sm.to(LoopState.WAIT_FRESH, self.tick, f"connected to {self.robot_link.name}")
        self._heartbeat()

    def _shutdown(self) -> None:
        """Hold, then e-stop repeated every period until acknowledged (at most ``stop_ack_timeout_s``); close a
        port we opened; end in DONE. Never raises on a dead link.

        The e-stop goes out at most once per period on the loop's clock (``next_estop += period``): other frames
        (ACKs, errors, malformed states) end a read early but not the wait, so a chatty robot is not flooded."""
        if self.robot_link.is_open:
            self._send(CommandMsg(self._next_seq(), self._clock(), self._hold))
            self._stop_acked = False
            self._stop_seq = self._last_state_seq
            next_estop = self._clock()
            deadline = next_estop + self.config.stop_ack_timeout_s
            while not self._stop_acked and self.robot_link.ok and self._clock() < deadline:
                self._send(EStopMsg(self._next_seq(), self._clock(), EStopReason.RUNTIME_EXIT))
                next_estop += self.period_s
                self._await_stop_ack(min(next_estop, deadline))
            if not self._stop_acked:
                self.counts["stop_not_acknowledged"] += 1
        if self.episodes.current is not None:
            self.episodes.end(None, aborted=True)
        self.sm.to(LoopState.DONE, self.tick, "shutdown")
        self.robot_link.close()

    def _await_stop_ack(self, until: float) -> None:
        """Read the link until the robot acknowledges the stop (a state flagged ESTOP_ACTIVE) or the loop's clock
        reaches ``until`` (seconds)."""
        while not self._stop_acked and self.robot_link.ok and (remaining := until - self._clock()) > 0:
            for msg in self.robot_link.poll(remaining):
                if isinstance(msg, StateMsg) and msg.flags & ESTOP_ACTIVE and self._answers_stop(msg):
                    self._stop_acked = True

    def _finish(self, reason: str) -> None:
        if self.episodes.current is not None:
            self.episodes.end(None, aborted=True)
        self.sm.to(LoopState.DONE, self.tick, reason)

    # One tick ----------------------------------------------------------------------------------------------------
    def _run_tick(self) -> None:
        deadline = self._next_tick
        self._window_start = now = self._clock()
        lateness = now - (deadline - self.period_s)
        self.stats.on_wake(lateness)
        self.robot_link.reconnect_if_due()
        if self.robot_link.generation != self._generation:  # a reopened port: trust no old reference
            self._generation = self.robot_link.generation
            self.checker.reset()
            self.unreported.reset()
            self.rate.reset()
            self._on_reconnect()
        record: TickRecord | None = None
        self._commanded = False
        handled = 0
        while self.sm.state is not LoopState.DONE:
            if self._fresh is not None and handled < MAX_STATES_PER_TICK:
                t_read, msg = self._fresh
                self._fresh, self._after_event = self._after_event, None  # the state after an event is next
                handled += 1
                record = self._on_state(max(t_read, self._window_start), msg) or record
                self._note_accepted()
                if self._commanded or self.sm.state is not LoopState.HOMING:
                    break
                continue  # a HomeMsg went out this tick: answer the new episode's first state at once
            remaining = deadline - self._clock()
            if remaining <= 0:
                if not handled:
                    record = self._on_silence()
                else:
                    self.robot_link.take_rejected()  # a good state came too: the malformed ones are only counted
                break
            self._receive(remaining)
        while self.sm.state is not LoopState.DONE and (remaining := deadline - self._clock()) > 0:
            self._receive(remaining)  # an e-stop acts at once; a state waits for the next tick
        if record is not None:
            record.jitter_s = lateness
            if self.ticklog is not None:
                self.ticklog.append(record)
        if self.on_tick is not None:
            self.on_tick(self, record)
        self.tick += 1
        self._next_tick += self.period_s
        behind = self._clock() - self._next_tick
        if behind > 0:  # whole periods were missed: skip them rather than run a burst of late ticks
            missed = int(behind // self.period_s) + 1
            self.stats.overruns += missed
            self._next_tick += missed * self.period_s

    # Receiving ---------------------------------------------------------------------------------------------------
    def _receive(self, timeout_s: float) -> None:
        messages = self.robot_link.poll(timeout_s)  # a down port waits out the timeout
        t = self._clock()
        for msg in messages:
            self._handle(msg, t)

    def _handle(self, msg: Message, t: float) -> None:
        if isinstance(msg, StateMsg):
            self.counts["states"] += 1
            last = self._last_state_seq
            if last is not None and msg.seq == last:
                self.counts["stale_seq"] += 1  # the same state again: a frozen sensor or a duplicate
                self._repeats_since_fresh += 1
                return
            self._repeats_since_fresh = 0
            if last is not None and not seq_newer(msg.seq, last):
                self.counts["old_seq"] += 1  # a replay, or a robot that restarted: the checker decides
                if self._fresh is not None:
                    return  # a newer state is waiting: the old one cannot matter more
            self._last_state_seq = msg.seq
            self._check_rate(msg)
            waiting = self._fresh
            if waiting is not None and waiting[1].flags & EVENT_FLAGS and not msg.flags & EVENT_FLAGS:
                # The event state (HOMED) is answered first and becomes the anchor; the newest state after it waits
                # and is checked against it. Handing the flag on to it instead would take one glitched state, read
                # with the HOMED one, for the home pose, unchecked, and plan the episode's first command from it.
                if self._after_event is not None:
                    self.counts["skipped_states"] += 1
                self._after_event = (t, msg)
                return
            if waiting is not None:
                self.counts["skipped_states"] += 1
            self._fresh = (t, msg)
        elif isinstance(msg, EStopMsg):
            self.counts["robot_estops"] += 1
            if self.sm.state in ACTIVE_MODES:
                self._safe_stop(f"robot e-stop (reason {msg.reason})", send_estop=False)
        elif isinstance(msg, ErrorMsg):
            self.robot_errors[msg.code] += 1
        else:
            self.counts[f"ignored_{type(msg).__name__}"] += 1

    # Safety -------------------------------------------------------------------------------------------------------
    def _safe_stop(self, reason: str, send_estop: bool = True) -> None:
        """Hold now, e-stop the robot (repeated until acknowledged), abort the episode; SAFE_STOP until the robot
        answers again."""
        self.counts["safe_stops"] += 1
        self._stopped_episode = self.episodes.current if self.sm.state is LoopState.RUN else None
        self._send_command(self._hold)
        self._stop_acked = not send_estop
        self._stop_seq = self._last_state_seq
        if send_estop:
            self._send(EStopMsg(self._next_seq(), self._clock(), EStopReason.WATCHDOG))
        if self.episodes.current is not None:
            self.episodes.end(None, aborted=True)
        self._fresh = self._after_event = None
        self._implausible_run = 0
        self._rejections.reset()
        self.checker.reset()  # after the stop, the robot is re-homed: the next accepted state is the new anchor
        self.unreported.reset()
        self._anchor = None
        logger.warning("safe stop at tick %d: %s", self.tick, reason)
        self._enter(LoopState.SAFE_STOP, reason)
        if not self.config.recover:
            self._finish(f"safe stop ({reason}); recover=False")

    # Sending ------------------------------------------------------------------------------------------------------
    def _next_seq(self) -> int:
        return self.robot_link.next_seq()

    def _send(self, msg: Message) -> None:
        self.robot_link.send(msg)

    def _send_command(self, action: np.ndarray) -> float:
        """Send one command and remember it (for the history and the barrier); returns the send time."""
        command = np.array(action, dtype=np.float64)
        seq = self._next_seq()
        t_sent = self._clock()
        self._send(CommandMsg(seq, t_sent, command))
        t_out = self._clock()
        reports_line = self._anchor is not None and bool(self._anchor.pending)
        self.line.sent(seq, command, reports_line, t_sent)
        if not reports_line:  # the robot says nothing of what it applies: reckon from what was sent
            self.unreported.sent(command.tolist())
        self._previous = command
        self._commanded = True
        self.counts["commands"] += 1
        return t_out

    def _heartbeat(self) -> None:
        self._send(HeartbeatMsg(self._next_seq(), self._clock()))

    def _enter(self, state: LoopState, reason: str) -> None:
        self.sm.to(state, self.tick, reason)
        self._mode_since = self._clock()

    def _record(
        self,
        msg: StateMsg | None,
        flat: np.ndarray,
        proposed: np.ndarray,
        sent: np.ndarray,
        reasons: tuple[str, ...],
        latency_s: float,
        stop: bool,
        policy_id: str = "",
    ) -> TickRecord:
        episode = self.episodes.current
        in_episode = episode is not None and self.sm.state is LoopState.RUN
        if stop and not in_episode and self._stopped_episode is not None:
            # the tick that stopped an episode belongs to it (the stop ended it just before this record): a reader
            # of the log sees the episode was cut short, not a stray tick outside any episode
            episode, in_episode, self._stopped_episode = self._stopped_episode, True, None
        return TickRecord(
            t_s=self._clock(),
            tick=self.tick,
            state=msg.state if msg is not None else EMPTY,
            obs_flat=flat,
            goal=episode.goal if in_episode else EMPTY,  # type: ignore[union-attr]
            proposed=proposed,
            sent=sent,
            reasons=reasons,
            latency_s=latency_s,
            jitter_s=0.0,
            episode_id=episode.index if in_episode else NO_EPISODE,  # type: ignore[union-attr]
            state_seq=msg.seq if msg is not None else -1,
            stop=stop,
            policy_id=policy_id,
        )
