"""The robot controller: a deadline-paced loop from robot state to safe command, over the wire link.

One period = one tick. The loop's clock is ``next_tick += period`` (never ``sleep(period)`` after compute): in
each period it waits on the link for the robot's next fresh state (newer sequence number) until the period's
deadline, answers it at once (state frame in -> command frame out is the tick latency), then keeps reading
until the deadline. A state that arrives after this period's command waits for the next tick, so the loop never
runs faster than the period, and a robot that streams states at the same rate is answered within the tick.

Per fresh state in RUN:

    history  <- the robot's reported delay line (StateMsg.pending) mapped to the commands this loop sent
    obs      =  contract.flatten(contract.build(state, history, goal))          (never rebuilt by hand)
    proposed =  policy(obs)                                                       (any InferenceBackend / PolicySlot)
    sent     =  filter_action(position, pending displacement, proposed, previous, state age, limits)

The state age is measured from when the robot made the state (its timestamp plus the smallest transit seen,
which absorbs the clock offset), so a latency spike ages states even while they keep arriving. A period with no
fresh state sends a heartbeat, or the hold once the state is older than ``watchdog_hold_s``; past
``watchdog_stop_s`` the loop stops safely (hold + e-stop). A NaN state is held at once. A robot e-stop stops at
once. After a safe stop the loop recovers when the robot answers again: fresh states -> hold -> home -> run.
The state machine is in ``state_machine.py``; the stop command goes out in ``finally``.
"""

from __future__ import annotations

import gc
import logging
import time
from collections import Counter
from collections.abc import Callable
from typing import Any

import numpy as np

from deploy.contract import ObservationContract
from deploy.runtime.command_line import HOLD_SEQ, CommandLine
from deploy.runtime.goals import Episode, GoalSource
from deploy.runtime.loop_config import LoopConfig
from deploy.runtime.realtime import enter_realtime
from deploy.runtime.robot_link import RobotLink
from deploy.runtime.run_report import EpisodeResult, RunReport
from deploy.runtime.safety import FilterResult, InterventionCounter, SafetyLimits, filter_action
from deploy.runtime.state_machine import LoopState, StateMachine
from deploy.runtime.ticklog import NO_EPISODE, TickLogWriter, TickRecord
from deploy.runtime.timing import TickStats
from deploy.wire import (
    CommandMsg,
    ErrorMsg,
    EStopMsg,
    EStopReason,
    HeartbeatMsg,
    HomeMsg,
    Link,
    Message,
    StateFlags,
    StateMsg,
    seq_newer,
)

logger = logging.getLogger(__name__)

Policy = Callable[[np.ndarray], np.ndarray]
_EMPTY = np.zeros(0)
MAX_STATES_PER_TICK = 2  # one command per tick; a second state only to answer a HOMED state without waiting
_STATE_ACTIVE = (LoopState.WAIT_FRESH, LoopState.HOLD, LoopState.HOMING, LoopState.RUN)


class Controller:
    """The fixed-rate controller (see the module docstring).

    :param port: a port name / pyserial URL (opened in CONNECT, reopened after a port failure) or an open ``Link``.
    :param contract: the policy's observation/action contract.
    :param policy: float32 obs [1, D] -> float32 action [1, A]: an ``InferenceBackend`` or a ``PolicySlot``
        (read once per tick, so a hot swap lands between ticks).
    :param limits: what the safety filter enforces.
    :param goals: the targets, one episode each.
    :param config: loop settings.
    :param ticklog: where every tick is appended (None: not logged).
    :param on_tick: called after every tick with (controller, record or None when nothing was commanded):
        monitoring and test hooks.
    :param clock: monotonic clock in seconds (the robot's timestamps need not share it).
    """

    def __init__(
        self,
        port: str | Link,
        contract: ObservationContract,
        policy: Policy | Any,
        limits: SafetyLimits,
        goals: GoalSource,
        config: LoopConfig | None = None,
        ticklog: TickLogWriter | None = None,
        on_tick: Callable[[Controller, TickRecord | None], None] | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.config = config or LoopConfig()
        if goals.goal_dim != contract.goal_dim:
            raise ValueError(f"goals are {goals.goal_dim}-D but the contract's goal is {contract.goal_dim}-D")
        if limits.position_dims != contract.goal_dim or contract.action_dim < limits.position_dims:
            raise ValueError(
                f"safety limits cover {limits.position_dims} axes; the contract has a {contract.goal_dim}-D "
                f"position and {contract.action_dim}-D action"
            )
        if abs(limits.action_scale_m - contract.action_scale_m) > 1e-12:
            raise ValueError(
                f"limits.action_scale_m {limits.action_scale_m} != contract.action_scale_m {contract.action_scale_m}"
            )
        delay = contract.history_len if self.config.delay_steps is None else self.config.delay_steps
        if not 0 <= delay <= contract.history_len:
            raise ValueError(f"delay_steps must be in 0..{contract.history_len} (the history length), got {delay}")
        self.contract = contract
        self.limits = limits
        self.goals = goals
        self.period_s = float(self.config.period_s or contract.control_period_s)
        self.delay_steps = delay
        self.ticklog = ticklog
        self.on_tick = on_tick
        self._clock = clock
        self._policy = policy
        self.sm = StateMachine()
        self.stats = TickStats(self.period_s)
        self.interventions = InterventionCounter()
        self.counts: Counter[str] = Counter()
        self.robot_link = RobotLink(port, self.counts, self.config.reconnect_interval_s, clock)
        self.robot_errors: Counter[int] = Counter()
        self.episodes: list[EpisodeResult] = []
        self.tick = 0
        self._pos = slice(*contract.position_slice)
        self._dims = limits.position_dims
        self._hold = contract.hold()
        self.line = CommandLine(contract, delay, self.counts)
        self._previous = contract.hold()
        self._last_state_seq: int | None = None
        self._last_valid: StateMsg | None = None
        self._last_valid_t = float("-inf")  # local time the newest valid state was made (estimated)
        self._min_transit = float("inf")
        self._fresh: tuple[float, StateMsg] | None = None
        self._window_start = 0.0
        self._next_tick = 0.0
        self._hold_count = 0
        self._episode: Episode | None = None
        self._episode_steps = 0
        self._home_tick = 0
        self._mode_since = 0.0
        self._commanded = False

    # Run -----------------------------------------------------------------------------------------------------
    def run(self) -> RunReport:
        """Run until the goals are served, ``max_ticks``, or an error; the stop goes out in ``finally``."""
        restore_scheduler = enter_realtime(self.config.realtime_priority)
        try:
            self._connect()
            if self.config.freeze_gc:
                gc.collect()
                gc.freeze()
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
            episodes=list(self.episodes),
            timing=self.stats.summary(),
            interventions=self.interventions.as_dict(),
            counts=dict(self.counts),
            robot_errors=dict(self.robot_errors),
            decoder_errors=self.robot_link.decoder_errors(),
            transitions=list(self.sm.history),
            ticks=self.tick,
        )

    def _connect(self) -> None:
        self.robot_link.open()  # LinkError names the port if it cannot be opened
        self._mode_since = self._clock()
        self.sm.to(LoopState.WAIT_FRESH, self.tick, f"connected to {self.robot_link.name}")
        self._heartbeat()

    def _shutdown(self) -> None:
        """Send the stop (hold, then e-stop), close a port we opened, end in DONE. Never raises on a dead link."""
        if self.robot_link.is_open:
            self._send(CommandMsg(self._next_seq(), self._clock(), self._hold))
            self._send(EStopMsg(self._next_seq(), self._clock(), EStopReason.RUNTIME_EXIT))
        if self._episode is not None:
            self._end_episode(None, aborted=True)
        self.sm.to(LoopState.DONE, self.tick, "shutdown")
        self.robot_link.close()

    def _finish(self, reason: str) -> None:
        if self._episode is not None:
            self._end_episode(None, aborted=True)
        self.sm.to(LoopState.DONE, self.tick, reason)

    # One tick ----------------------------------------------------------------------------------------------------
    def _run_tick(self) -> None:
        deadline = self._next_tick
        self._window_start = now = self._clock()
        lateness = now - (deadline - self.period_s)
        self.stats.on_wake(lateness)
        self.robot_link.reconnect_if_due()
        record: TickRecord | None = None
        self._commanded = False
        handled = 0
        while self.sm.state is not LoopState.DONE:
            if self._fresh is not None and handled < MAX_STATES_PER_TICK:
                t_read, msg = self._fresh
                self._fresh = None
                handled += 1
                record = self._on_state(max(t_read, self._window_start), msg) or record
                if self._commanded or self.sm.state is not LoopState.HOMING:
                    break
                continue  # a HomeMsg went out this tick: answer the new episode's first state at once
            remaining = deadline - self._clock()
            if remaining <= 0:
                if not handled:
                    record = self._on_silence()
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
            if self._last_state_seq is not None and not seq_newer(msg.seq, self._last_state_seq):
                self.counts["stale_seq"] += 1  # repeated or old sequence number: a frozen sensor or a replay
                return
            self._last_state_seq = msg.seq
            self.stats.on_robot_state(msg.seq, msg.t_s, restarted=bool(msg.flags & StateFlags.HOMED))
            self._min_transit = min(self._min_transit, t - msg.t_s)
            if self._fresh is not None:
                self.counts["skipped_states"] += 1
            self._fresh = (t, msg)
        elif isinstance(msg, EStopMsg):
            self.counts["robot_estops"] += 1
            if self.sm.state in _STATE_ACTIVE:
                self._safe_stop(f"robot e-stop (reason {msg.reason})", send_estop=False)
        elif isinstance(msg, ErrorMsg):
            self.robot_errors[msg.code] += 1
        else:
            self.counts[f"ignored_{type(msg).__name__}"] += 1

    # A fresh state arrived --------------------------------------------------------------------------------------
    def _on_state(self, t_in: float, msg: StateMsg) -> TickRecord | None:
        if msg.state.shape != (self.contract.state_dim,):
            raise ValueError(
                f"the robot sends {msg.state.size} state values; the policy contract {self.contract.name!r} expects "
                f"{self.contract.state_dim}. Check that the robot and the policy package belong together"
            )
        valid = bool(np.all(np.isfinite(msg.state)))
        if valid:
            self._last_valid = msg
            self._last_valid_t = msg.t_s + self._min_transit
        else:
            self.counts["nan_states"] += 1
        robot_estop = bool(msg.flags & StateFlags.ESTOP_FROM_ROBOT)
        state = self.sm.state
        if robot_estop and state in _STATE_ACTIVE:
            self._safe_stop("robot reports an e-stop", send_estop=False)
            return None
        if state is LoopState.SAFE_STOP:
            if valid and not robot_estop and self.config.recover:
                self._enter(LoopState.WAIT_FRESH, "the robot answers again")
                self._enter(LoopState.HOLD, "fresh state")
                self._hold_count = 0
                return self._hold_tick(msg, valid)
            self._heartbeat()
            return None
        if state is LoopState.WAIT_FRESH:
            if not valid:
                self._heartbeat()
                return None
            self._enter(LoopState.HOLD, "fresh state")
            self._hold_count = 0
            return self._hold_tick(msg, valid)
        if state is LoopState.HOLD:
            return self._hold_tick(msg, valid)
        if state is LoopState.HOMING:
            if valid and msg.flags & StateFlags.HOMED:
                self._enter(LoopState.RUN, f"episode {self._episode.index} starts")  # type: ignore[union-attr]
                return self._policy_tick(t_in, msg, valid)
            self._homing_retry()
            return None
        return self._policy_tick(t_in, msg, valid)

    def _hold_tick(self, msg: StateMsg, valid: bool) -> TickRecord:
        """HOLD: answer with the hold; after ``hold_ticks`` valid states in a row, home for the next episode."""
        self._hold_count = self._hold_count + 1 if valid else 0
        self._send_command(self._hold)
        if self._hold_count >= self.config.hold_ticks:
            self._start_episode()
        return self._record(msg, _EMPTY, self._hold, self._hold, (), float("nan"), False)

    def _policy_tick(self, t_in: float, msg: StateMsg, valid: bool) -> TickRecord | None:
        """RUN: build the observation, ask the policy, filter, send (or end the episode)."""
        goal = self._episode.goal  # type: ignore[union-attr]
        if valid and self._episode_steps >= self.config.max_episode_steps:
            self._end_episode(msg, aborted=False)
            self._start_episode()
            return None
        if self._episode_steps and msg.pending and msg.pending[-1] == HOLD_SEQ:
            self.counts["robot_held"] += 1  # our previous command was lost or reached the robot after its step
        self.line.sync(msg.pending)
        flat = _EMPTY
        proposed = self._hold
        if valid:
            flat = self.contract.flatten(self.contract.build(msg.state, self.line.history, goal))
            proposed = self._infer(flat)
        age = self._clock() - self._last_valid_t
        result = filter_action(
            msg.state[self._pos], self.line.displacement_m(self._dims), proposed, self._previous, age, self.limits
        )
        return self._apply(result, t_in, msg, flat, proposed, counts_as_step=valid)

    def _apply(
        self,
        result: FilterResult,
        t_in: float | None,
        msg: StateMsg | None,
        flat: np.ndarray,
        proposed: np.ndarray,
        counts_as_step: bool,
    ) -> TickRecord | None:
        self.interventions.add(result.reasons)
        if result.stop:
            self._safe_stop("watchdog: no fresh valid state within watchdog_stop_s")
            return self._record(msg, flat, proposed, self._hold, result.reasons, float("nan"), True)
        t_out = self._send_command(result.action)
        latency = float("nan")
        if t_in is not None:
            latency = t_out - t_in
            self.stats.on_command(self.tick, t_in, t_out, restart=counts_as_step and self._episode_steps == 0)
        if counts_as_step:
            self._episode_steps += 1
        return self._record(msg, flat, proposed, result.action, result.reasons, latency, False)

    def _infer(self, flat: np.ndarray) -> np.ndarray:
        backend = self._policy.current() if hasattr(self._policy, "current") else self._policy
        action = np.asarray(backend(flat[None, :]), dtype=np.float64).reshape(-1)
        if action.size != self.contract.action_dim:
            raise ValueError(f"the policy returned {action.size} values; the contract needs {self.contract.action_dim}")
        return action

    # No fresh state this period ---------------------------------------------------------------------------------
    def _on_silence(self) -> TickRecord | None:
        state = self.sm.state
        now = self._clock()
        if state is LoopState.RUN:
            age = now - self._last_valid_t
            if age <= self.limits.watchdog_hold_s:
                self._heartbeat()  # a late frame is no fault yet; a lock-step robot whose answer was lost replies
                return None
            position = self._last_valid.state[self._pos]  # type: ignore[union-attr]
            result = filter_action(
                position, self.line.displacement_m(self._dims), self._hold, self._previous, age, self.limits
            )
            return self._apply(result, None, None, _EMPTY, self._hold, counts_as_step=False)
        if state is LoopState.HOLD:
            self._hold_count = 0
            if now - self._last_valid_t > self.limits.watchdog_stop_s:
                self._safe_stop("watchdog while holding")
                return None
        startup = state is LoopState.WAIT_FRESH and self._last_valid is None
        if startup and now - self._mode_since > self.config.startup_timeout_s:
            raise TimeoutError(
                f"no valid state from the robot on {self.robot_link.name} within "
                f"{self.config.startup_timeout_s} s of connecting; is the robot running and the port right?"
            )
        if state is LoopState.SAFE_STOP and now - self._mode_since > self.config.recover_timeout_s:
            self._finish(f"the robot stayed silent for {self.config.recover_timeout_s} s after a safe stop")
            return None
        if state is LoopState.HOMING:
            self._homing_retry()
            return None
        self._heartbeat()
        return None

    # Episodes ---------------------------------------------------------------------------------------------------
    def _start_episode(self) -> None:
        episode = self.goals.next()
        if episode is None:
            self._finish("all goals served")
            return
        self._episode = episode
        self._episode_steps = 0
        self.line.new_episode()
        self._previous = self._hold.copy()
        self._enter(LoopState.HOMING, f"episode {episode.index}: home (seed {episode.seed})")
        self._send_home()

    def _send_home(self) -> None:
        self._home_tick = self.tick
        self._send(HomeMsg(self._next_seq(), self._clock(), self._episode.seed))  # type: ignore[union-attr]

    def _homing_retry(self) -> None:
        if self.tick - self._home_tick >= self.config.home_retry_ticks:
            self.counts["home_retries"] += 1
            self._send_home()
        else:
            self._heartbeat()

    def _end_episode(self, msg: StateMsg | None, aborted: bool) -> None:
        episode = self._episode
        if episode is None:
            return
        distance = float("nan")
        if msg is not None:
            distance = float(np.linalg.norm(msg.state[self._pos] - episode.goal))
        success = not aborted and distance < self.config.success_radius_m
        self.episodes.append(
            EpisodeResult(episode.index, episode.seed, episode.goal, success, distance, self._episode_steps, aborted)
        )
        self._episode = None

    # Safety -------------------------------------------------------------------------------------------------------
    def _safe_stop(self, reason: str, send_estop: bool = True) -> None:
        """Hold now, e-stop the robot, abort the episode; SAFE_STOP until the robot answers again."""
        self.counts["safe_stops"] += 1
        self._send_command(self._hold)
        if send_estop:
            self._send(EStopMsg(self._next_seq(), self._clock(), EStopReason.WATCHDOG))
        if self._episode is not None:
            self._end_episode(None, aborted=True)
        self._fresh = None
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
        self.line.sent(seq, command, msg_reports_line(self._last_valid))
        self._send(CommandMsg(seq, self._clock(), command))
        t_out = self._clock()
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
    ) -> TickRecord:
        in_episode = self._episode is not None and self.sm.state is LoopState.RUN
        return TickRecord(
            t_s=self._clock(),
            tick=self.tick,
            state=msg.state if msg is not None else _EMPTY,
            obs_flat=flat,
            goal=self._episode.goal if in_episode else _EMPTY,  # type: ignore[union-attr]
            proposed=proposed,
            sent=sent,
            reasons=reasons,
            latency_s=latency_s,
            jitter_s=0.0,
            episode_id=self._episode.index if in_episode else NO_EPISODE,  # type: ignore[union-attr]
            state_seq=msg.seq if msg is not None else -1,
            stop=stop,
        )


def msg_reports_line(msg: StateMsg | None) -> bool:
    """True when the robot reports its delay line (``StateMsg.pending``); unknown before the first state."""
    return msg is not None and bool(msg.pending)
