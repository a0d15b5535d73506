"""The robot controller: a deadline-paced state machine over parts that own their state.

One period = one tick. The loop's clock is ``next_tick += period`` (never ``sleep(period)`` after compute): in each
period it waits on the link for the robot's next fresh state until the period's deadline, answers it at once (state
frame in -> command frame out is the tick latency), then keeps reading until the deadline. A state that arrives after
this period's command waits for the next tick, so the loop never runs faster than the period.

The parts, each with its own fields and tests:

    RobotLink      (robot_link.py)     the port: open, reopen, send, poll, decode
    StateInbox     (state_inbox.py)    which received state is answered next; the robot's step rate
    StateIntake    (state_intake.py)   the checks of a state, the anchor, the position bound, rejections
    Homing         (homing.py)         HOME, its answer, resends, round trips
    ResetHistory   (robot_resets.py)   the robot's own restarts and homings over time
    EpisodeTracker (episodes.py)       the goals served and their results
    CommandPath    (command_path.py)   observation -> guarded policy -> safety filter; the previous command
    CommandLine    (command_line.py)   the commands in flight and the policy's action history
    Retraction     (retract.py)        the retract toward home after an episode (a cell arm)
    StopLatch      (stop_latch.py)     the e-stop in force and its acknowledgement
    Outbox         (outbox.py)         what is sent (commands noted where they are kept); a command this tick?
    TickPacer      (tick_pacer.py)     the tick's deadline, missed periods skipped
    TickRecorder   (tick_recorder.py)  each tick's record; the episode a safe stop cut short
    ExitStop       (exit_stop.py)      the hold and the repeated e-stop at the end of a run
    TickStats, StateMachine, the tick log

This class paces the ticks, reads the link and offers the actions (enter a mode; stop; finish; record a tick); what
each mode does with a message or a state is decided by ``ModeRules`` (``loop_modes.py``) and its per-mode handlers
(``loop_run.py``, ``loop_homing.py``, ``loop_safe_stop.py``, ``loop_resets.py``), which ask the parts and act through
these actions and the ``Outbox``.

The state age is measured from when the robot made the state (its stamp plus the checker's clock offset, taken from
accepted states only). A period with no fresh state sends a heartbeat, or the hold once the state is older than
``watchdog_hold_s``; past ``watchdog_stop_s`` the loop stops safely. In safe stop the e-stop repeats every period
until the robot acknowledges it; then, when the robot answers again: fresh states -> hold -> home -> run. The stop
command goes out in ``finally`` and repeats until acknowledged.
"""

from __future__ import annotations

import logging
import time
from collections import Counter
from collections.abc import Callable
from typing import Any

import numpy as np

from deploy.contract import ObservationContract
from deploy.robot_spec import RobotSpec
from deploy.runtime.command_line import CommandLine
from deploy.runtime.command_path import CommandPath
from deploy.runtime.cpu_latency import hold_cpu_latency
from deploy.runtime.episodes import EpisodeTracker
from deploy.runtime.exit_stop import ExitStop
from deploy.runtime.goals import GoalSource
from deploy.runtime.homing import Homing
from deploy.runtime.loop_config import LoopConfig
from deploy.runtime.loop_modes import ModeRules
from deploy.runtime.outbox import Outbox
from deploy.runtime.policy_guard import PolicyGuard
from deploy.runtime.policy_worker import PolicyWorker
from deploy.runtime.realtime import enter_realtime, pin_threads
from deploy.runtime.retract import RetractedEpisodes, Retraction
from deploy.runtime.robot_link import RobotLink
from deploy.runtime.robot_resets import ResetHistory
from deploy.runtime.run_report import RunReport
from deploy.runtime.safety import InterventionCounter, SafetyLimits
from deploy.runtime.separation import SeparationBarrier
from deploy.runtime.slack_collector import SlackCollector
from deploy.runtime.state_check import StateChecker
from deploy.runtime.state_inbox import StateInbox
from deploy.runtime.state_intake import StateIntake
from deploy.runtime.state_machine import LoopState, StateMachine
from deploy.runtime.stop_latch import StopLatch
from deploy.runtime.tick_pacer import TickPacer
from deploy.runtime.tick_record import TickRecord, check_policy_id
from deploy.runtime.tick_recorder import TickRecorder
from deploy.runtime.ticklog import TickLogWriter
from deploy.runtime.timing import TickStats
from deploy.wire import DEFAULT_BAUDRATE, Link, StateMsg

logger = logging.getLogger(__name__)

Policy = Callable[[np.ndarray], np.ndarray]
MAX_STATES_PER_TICK = 2  # one command per tick; a second state only to answer a HOMED state without waiting


class Controller:
    """The fixed-rate controller (see the module docstring).

    :param port: a port name / pyserial URL (opened in CONNECT, reopened after a port failure) or an open ``Link``.
    :param contract: the policy's observation/action contract.
    :param policy: float32 obs [1, D] -> float32 action [1, A]: an ``InferenceBackend`` or a ``PolicySlot``
        (read once per tick, so a hot swap lands between ticks).
    :param spec: the robot spec: workspace, limits, gain bound, delay, noise, plausible speed.
    :param goals: the targets, one episode each.
    :param config: loop settings.
    :param ticklog: where every tick is appended (None: not logged).
    :param on_tick: called after every tick with (controller, record or None if nothing was commanded): hooks.
    :param clock: monotonic clock in seconds (the robot's timestamps need not share it). On ``time.monotonic`` the
        policy runs on a worker thread and a tick waits for it only until its deadline; on any other clock (a test's)
        it is called inline, since such a clock cannot time a thread.
    :param checker_class: the state checker (``StateChecker``; a benchmark swaps in one that accepts everything to
        measure what the checks cost).
    :param baudrate: line rate of a named serial port, bit/s (ignored by ptys, sockets and a given ``Link``).
    :param policy_id: the id the tick log records on the ticks a bare backend was asked (its package's
        ``manifest_sha256``, ``PolicyPackage.policy_id``); a ``PolicySlot`` names the id of each backend it holds.
    :param sleep: how the loop waits while the port is down (seconds, on ``clock``'s time base; a test clock
        passes its own).
    :param separation: in a two-arm cell, this arm's separation barrier (``deploy.runtime.separation``); None alone.
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
        separation: SeparationBarrier | None = None,
    ) -> None:
        self.config = config or LoopConfig()
        limits = SafetyLimits.from_spec(spec, contract)
        _check_setup(contract, spec, goals, limits)
        self.contract, self.spec, self.limits = contract, spec, limits
        self.period_s = float(self.config.period_s or contract.control_period_s)
        self.ticklog, self.on_tick = ticklog, on_tick
        self._clock = clock
        self.sm = StateMachine()
        self.stats = TickStats(self.period_s)
        self.interventions = InterventionCounter()
        self.counts: Counter[str] = Counter()
        self.robot_errors: Counter[int] = Counter()
        self.robot_link = RobotLink(
            port, self.counts, self.config.reconnect_interval_s, clock, contract, baudrate, sleep
        )
        self.episodes = EpisodeTracker(
            goals, slice(*contract.achieved_slice), self.config.success_radius_m, self.config.max_episode_steps
        )
        self.line = CommandLine(contract, spec.delay_range[1], self.counts, limits.position_dims)
        self.intake = StateIntake(spec, contract, self.period_s, self.config, self.line, self.counts, checker_class)
        self.inbox = StateInbox(self.counts, self.period_s)
        self.homing = Homing(self.config, self.period_s, spec.homing_s)
        self.resets = ResetHistory(self.config.max_robot_resets, self.config.robot_reset_window_s)
        self.latch = StopLatch(self.counts, limits.watchdog_stop_s, self.config.resync_states)
        worker = PolicyWorker() if clock is time.monotonic else None
        guard = PolicyGuard(policy, contract.action_dim, self.period_s, clock, check_policy_id(policy_id), worker)
        self.path = CommandPath(contract, limits, self.line, guard, separation)
        self.collector = SlackCollector()
        self.retraction = Retraction.for_loop(spec, self.config, limits, contract, self.counts)
        if separation is not None:  # the barrier plans from this arm's bound, position and commands in flight
            retracted = RetractedEpisodes(self.episodes, self.retraction, self.sm)
            separation.attach(limits, self.period_s, contract.position_slice, self.intake, self.line, retracted)
        self.outbox = Outbox(self.robot_link, clock, self.line, self.intake, self.path, self.counts)
        self.recorder = TickRecorder(clock, self.episodes)
        self.exit_stop = ExitStop(self.robot_link, self.latch, clock, self.period_s, self.config.stop_ack_timeout_s)
        self.modes = ModeRules(self)
        self.tick = 0
        self.position_slice = slice(*contract.position_slice)
        self.hold = contract.hold()  # the hold command (zeros)
        self.mode_since = 0.0  # when the current mode was entered (seconds, the loop's clock)
        self.pacer = TickPacer(self.period_s, self.stats)
        self._generation = 0
        self._window_start = 0.0

    def home_retry_ticks(self) -> int:
        """Ticks a HOME's answer is waited for before it is resent (``Homing.retry_ticks``)."""
        return self.homing.retry_ticks()

    # Run -----------------------------------------------------------------------------------------------------
    def run(self) -> RunReport:
        """Run until the goals are served, ``max_ticks``, or an error; the stop goes out in ``finally``."""
        worker = self.path.guard.worker  # the policy runs there: at the loop's priority, or the loop waits behind it
        helpers = () if worker is None else (worker.native_id,)
        restore_affinity = pin_threads(self.config.cpu, helpers)
        try:
            restore_scheduler = enter_realtime(self.config.realtime_priority, helpers)
        except BaseException:
            restore_affinity()
            raise
        try:
            release_latency = hold_cpu_latency(self.config.cpu_latency_us)
        except BaseException:
            restore_scheduler()
            restore_affinity()
            raise
        try:
            self.robot_link.open()  # LinkError names the port if it cannot be opened
            if self.config.freeze_gc:  # before the first message: the robot's first answer must not wait for it
                self.collector.start()
            self.mode_since = self._clock()
            self.sm.to(LoopState.WAIT_FRESH, self.tick, f"connected to {self.robot_link.name}")
            self.outbox.heartbeat()
            self.pacer.start(self._clock())
            while self.sm.state is not LoopState.DONE:
                self._run_tick()
                if self.config.max_ticks is not None and self.tick >= self.config.max_ticks:
                    self.finish("tick limit reached")
        finally:
            self._shutdown()
            self.path.guard.close()
            self.collector.stop()
            release_latency()
            restore_scheduler()
            restore_affinity()
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

    def _shutdown(self) -> None:
        """Hold, then e-stop repeated every period until acknowledged (``ExitStop``, at most
        ``stop_ack_timeout_s``); close a port we opened; end in DONE. Never raises on a dead link."""
        if self.robot_link.is_open and not self.exit_stop.send(
            self.hold, self.inbox.last_seq, self.intake.checker.offset_s
        ):
            self.counts["stop_not_acknowledged"] += 1
        self.episodes.abort()
        self.sm.to(LoopState.DONE, self.tick, "shutdown")
        self.robot_link.close()

    def finish(self, reason: str) -> None:
        """End the run (DONE), aborting the episode under way."""
        self.episodes.abort()
        self.sm.to(LoopState.DONE, self.tick, reason)

    # One tick ----------------------------------------------------------------------------------------------------
    def _run_tick(self) -> None:
        deadline = self.pacer.deadline
        self._window_start = now = self._clock()
        lateness = self.pacer.wake(now)
        self.robot_link.reconnect_if_due()
        if self.robot_link.generation != self._generation:  # a reopened port: trust no old reference
            self._generation = self.robot_link.generation
            self.intake.restart_checks()
            self.inbox.rate.reset()
            self.modes.on_reconnect()
        record: TickRecord | None = None
        self.outbox.new_tick()
        self.path.before_state()
        handled = 0
        while self.sm.state is not LoopState.DONE:
            if self.inbox.waiting and handled < MAX_STATES_PER_TICK:
                t_read, msg = self.inbox.take()  # type: ignore[misc]
                handled += 1
                record = self.modes.on_state(max(t_read, self._window_start), msg) or record
                self.modes.note_accepted()
                if self.outbox.commanded or self.sm.state is not LoopState.HOMING:
                    break
                continue  # a HomeMsg went out this tick: answer the new episode's first state at once
            remaining = deadline - self._clock()
            if remaining <= 0:
                if not handled:
                    record = self.modes.on_silence()
                else:
                    self.robot_link.take_rejected()  # a good state came too: the malformed ones are only counted
                break
            self._receive(remaining)
        if record is not None:  # written now, while the robot steps: not when its next state may be arriving
            record.jitter_s = lateness
            if self.ticklog is not None:
                self.ticklog.append(record)
        self.collector.after_command()  # the answer is out: the collector's turn, not in the next state's tick
        while self.sm.state is not LoopState.DONE and (remaining := deadline - self._clock()) > 0:
            self._receive(remaining)  # an e-stop acts at once; a state waits for the next tick
        if self.on_tick is not None:
            self.on_tick(self, record)
        self.tick += 1
        self.pacer.advance(self._clock())

    # Receiving ---------------------------------------------------------------------------------------------------
    def _receive(self, timeout_s: float) -> None:
        messages = self.robot_link.poll(timeout_s)  # a down port waits out the timeout
        t = self._clock()
        for msg in messages:
            self.modes.on_message(msg, t)

    # Actions (used by ModeRules) -------------------------------------------------------------------------------
    def clock(self) -> float:
        """The loop's clock (seconds)."""
        return self._clock()

    def safe_stop(self, reason: str, send_estop: bool = True) -> None:
        """Hold now, e-stop the robot (repeated until acknowledged), abort the episode; SAFE_STOP until the robot
        answers again."""
        self.counts["safe_stops"] += 1
        self.recorder.note_stop(self.sm.state is LoopState.RUN)
        self.outbox.command(self.hold)
        self.latch.engage(self.inbox.last_seq, self._clock(), self.intake.checker.offset_s, needs_ack=send_estop)
        if send_estop:
            self.outbox.estop()
        self.episodes.abort()
        self.inbox.clear()
        self.intake.reset()  # after the stop, the robot is re-homed: the next accepted state is the new anchor
        logger.warning("safe stop at tick %d: %s", self.tick, reason)
        self.enter(LoopState.SAFE_STOP, reason)
        if not self.config.recover:
            self.finish(f"safe stop ({reason}); recover=False")

    def enter(self, state: LoopState, reason: str) -> None:
        self.sm.to(state, self.tick, reason)
        self.mode_since = self._clock()

    def record(
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
        """The tick's record (the tick log's row, ``TickRecorder``); ``policy_id``: the policy asked ("": none)."""
        bounds = self.intake.bounds if msg is not None else None
        in_run = self.sm.state is LoopState.RUN
        return self.recorder.record(
            self.tick, in_run, bounds, msg, flat, proposed, sent, reasons, latency_s, stop, policy_id
        )


def _check_setup(contract: ObservationContract, spec: RobotSpec, goals: GoalSource, limits: SafetyLimits) -> None:
    """Refuse goals and a contract that do not fit each other (ValueError); warn of a spec without a home pose."""
    if goals.goal_dim != contract.goal_dim:
        raise ValueError(f"goals are {goals.goal_dim}-D but the contract's goal is {contract.goal_dim}-D")
    if contract.action_dim < limits.position_dims:
        raise ValueError(f"the contract's {contract.action_dim}-D action has no {limits.position_dims}-D move")
    if spec.home_position_m is None:
        logger.warning(
            "robot spec %s has no home pose: a glitched HOMED state cannot be told from the arm at home, and the "
            "first command of each episode is planned from it; `robot-grpo calibrate` measures the home",
            spec.robot_id,
        )
