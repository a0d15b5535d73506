"""One command/state exchange at a time over the wire link, for the calibration probe (``calibration.probe``).

Every command goes through ``deploy.runtime.safety.filter_action`` with the safe box shrunk by a margin and the
commands in flight counted; every state is checked (fresh sequence number, finite, no e-stop, no jump that no
command explains, no motion while holding), and the robot's clock must step at the contract's control period
(``measure_rate``: a robot configured for another rate aborts the probe, where before it was calibrated and written
to a spec its policy could not run on). Anything wrong raises ``ProbeAbortError`` after the hold is sent.
"""

from __future__ import annotations

import logging
import math
import time
from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from deploy.contract import MAX_DELAY_STEPS, ObservationContract, in_flight_displacement_m
from deploy.robot_spec_sections import AXES, check_safe_name, parse_state_bounds
from deploy.runtime.safety import SafetyLimits, filter_action
from deploy.runtime.state_rate import StateRateCheck
from deploy.wire import (
    CommandMsg,
    ErrorCode,
    ErrorMsg,
    EStopMsg,
    HomeMsg,
    Link,
    LinkError,
    StateFlags,
    StateMsg,
    seq_after,
    seq_newer,
)

logger = logging.getLogger(__name__)

ESTOP_FLAGS = StateFlags.ESTOP_ACTIVE | StateFlags.ESTOP_FROM_ROBOT
MIN_RATE_STATES = 4  # unprompted states that show a free-running robot (3 intervals: a median is no one glitch)


class CalibrationError(ValueError):
    """A calibration that could not measure what it needs (unreliable delay, an empty workspace, a bad setting)."""


class ProbeAbortError(CalibrationError):
    """The probe stopped early; the robot was sent the hold command. ``reason``: estop | dead_link |
    bad_state | unexpected_motion | rejected_command | rate_mismatch."""

    def __init__(self, reason: str, detail: str) -> None:
        super().__init__(f"calibration aborted ({reason}): {detail}; the robot was left holding")
        self.reason = reason


@dataclass(frozen=True)
class ProbeConfig:
    """What to measure and how carefully. Units: metres, command units, control steps, seconds.

    :param safe_box_low: lower corner of the box the gripper must never be commanded out of (metres).
    :param safe_box_high: upper corner (metres).
    :param robot_id: written into the calibration file.
    :param repeats: delay measurements (their spread is reported).
    :param probe_steps: commands per delay measurement.
    :param probe_amplitude: size of each probing command (units).
    :param probe_excursion: bound on the running sum of probing commands per axis (units).
    :param rest_steps: states recorded at rest for the noise estimate.
    :param rate_listen_periods: control periods the probe sends nothing after the first HOME, to time the states a
        free-running robot sends by itself (``ProbeSession.measure_rate``).
    :param settle_steps: hold steps before each measurement (flushes the delay line; > max_delay_steps).
    :param max_delay_steps: longest delay looked for (control steps).
    :param face_amplitude: command toward a face (units).
    :param face_max_steps: step budget per face.
    :param stall_window: steps averaged when judging "the arm stopped moving" (``measure.stalled``).
    :param stall_ratio: stopped = moved less than this share of the displacement applied in the window.
    :param stall_min_applied_m: windows with less applied displacement (metres) are not judged.
    :param min_face_command: a face probe ends when the barrier cuts the command below this (units).
    :param return_tolerance_m: back at the start when within this distance (metres).
    :param margin_m: the probe keeps this far inside the safe box, and a reach found by a stop is pulled in
        by it (metres); it grows to 4 noise std once the noise is known.
    :param state_timeout_s: no fresh state for this long = dead link (seconds).
    :param home_timeout_s: wait for the first state after HOME (seconds).
    :param max_rest_speed_m: mean speed while holding above this is an unexpected motion (metres per step).
    :param rest_speed_window: steps over which the rest speed is averaged.
    :param max_action: command bound the calibration file will carry (units).
    :param max_action_rate: rate limit the calibration file will carry (units per step).
    :param barrier_fraction: barrier fraction used while probing and written to the file.
    :param assumed_gain_max: actuator gain bound (metres moved per metre commanded) the probe's barrier plans with
        until the gain is measured.
    :param seed: seed of the probing sequences (and of HOME).
    :param state_bounds: the range of other state fields in their units, from the robot's model (a finger joint's
        limits): written to the spec for the runtime's checks; every state the probe reads must lie inside them.
    """

    safe_box_low: tuple[float, float, float]
    safe_box_high: tuple[float, float, float]
    robot_id: str = "robot"
    repeats: int = 5
    probe_steps: int = 64
    probe_amplitude: float = 0.3
    probe_excursion: float = 0.6
    rest_steps: int = 300
    rate_listen_periods: int = 12
    settle_steps: int = MAX_DELAY_STEPS + 2
    max_delay_steps: int = MAX_DELAY_STEPS
    face_amplitude: float = 0.4
    face_max_steps: int = 80
    stall_window: int = 8
    stall_ratio: float = 0.1
    stall_min_applied_m: float = 0.01
    min_face_command: float = 0.02
    return_tolerance_m: float = 0.01
    margin_m: float = 0.01
    state_timeout_s: float = 1.0
    home_timeout_s: float = 10.0
    max_rest_speed_m: float = 0.003
    rest_speed_window: int = 20
    max_action: float = 1.0
    max_action_rate: float = 2.0
    barrier_fraction: float = 0.5
    assumed_gain_max: float = 2.0
    seed: int = 0
    state_bounds: Mapping[str, tuple[float, float]] | None = None

    def __post_init__(self) -> None:
        check_safe_name(self.robot_id, "robot_id")
        low, high = np.asarray(self.safe_box_low, float), np.asarray(self.safe_box_high, float)
        if low.shape != (AXES,) or high.shape != (AXES,) or not np.all(low + 2 * self.margin_m < high):
            raise ValueError(
                f"safe box {low.tolist()} .. {high.tolist()} must be 3-D with low + 2 x margin_m ({self.margin_m} m) "
                "< high on every axis"
            )
        if self.settle_steps <= self.max_delay_steps:
            raise ValueError(f"settle_steps ({self.settle_steps}) must exceed max_delay_steps ({self.max_delay_steps})")
        for name in ("repeats", "probe_steps", "rest_steps", "face_max_steps", "stall_window", "rest_speed_window"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be >= 1, got {getattr(self, name)}")
        if self.rate_listen_periods < MIN_RATE_STATES + 2:
            raise ValueError(
                f"rate_listen_periods must be >= {MIN_RATE_STATES + 2} control periods (a free-running robot must send "
                f"{MIN_RATE_STATES} states in it to be told from a lock-step one), got {self.rate_listen_periods}"
            )
        if not 0 <= self.max_delay_steps <= MAX_DELAY_STEPS:
            raise ValueError(f"max_delay_steps must be in 0..{MAX_DELAY_STEPS}, got {self.max_delay_steps}")
        object.__setattr__(self, "state_bounds", parse_state_bounds(self.state_bounds))  # RobotSpecError says why


@dataclass
class ProbeLog:
    """Everything the probe sent and saw (for reports and tests). Positions in metres."""

    commanded_positions_m: list[np.ndarray] = field(default_factory=list)  # position + in flight + this command
    positions_m: list[np.ndarray] = field(default_factory=list)
    commands: list[np.ndarray] = field(default_factory=list)
    interventions: dict[str, int] = field(default_factory=dict)
    homing_s: list[float] = field(default_factory=list)  # per HOME: sent -> its HOMED state read (seconds)
    home_positions_m: list[np.ndarray] = field(default_factory=list)  # per HOME: the HOMED state's position


def bounded_fields(
    contract: ObservationContract, bounds: Mapping[str, tuple[float, float]] | None
) -> list[tuple[str, slice, float, float]]:
    """(field name, its slice of the state, low, high) for each field ``bounds`` names; a name the contract has no
    field of, or the position's (the safe box bounds it), is a CalibrationError (a ValueError) naming the fields it
    may bound."""
    where = {name: slice(start, stop) for name, start, stop in contract.field_spans()}
    allowed = [name for name in where if name != contract.position_field]
    out = []
    for name, (low, high) in (bounds or {}).items():
        if name not in allowed:
            raise CalibrationError(
                f"state_bounds names {name!r}, which is not a field of the {contract.name} state the probe may "
                f"bound (the position is the safe box's); the fields: {', '.join(allowed)}"
            )
        out.append((name, where[name], low, high))
    return out


class ProbeSession:
    """One command/state exchange at a time over a link, every command checked by the safety filter."""

    def __init__(self, link: Link, contract: ObservationContract, config: ProbeConfig) -> None:
        self.link = link
        self.contract = contract
        self.config = config
        self.scale = contract.action_scale_m
        self.position_slice = slice(*contract.position_slice)
        self.log = ProbeLog()
        self._seq = 0
        self._last_state_seq: int | None = None
        self.position = np.full(AXES, np.nan)
        self.assumed_delay = config.max_delay_steps  # until measured: the longest delay looked for
        self.gain_max = config.assumed_gain_max  # until measured: the configured prior bound
        self._sent: deque[np.ndarray] = deque(maxlen=MAX_DELAY_STEPS)  # commands (units), newest last
        self.previous_action = contract.hold()
        self.max_jump_m = math.inf  # set once the noise is known
        self.noise_std_m = 0.0
        self.set_margin(config.margin_m)
        self._bounded = bounded_fields(contract, config.state_bounds)
        self.measured_period_s: float | None = None  # the robot's own state period (measure_rate; None: lock-step)

    # Limits ----------------------------------------------------------------------------------------------
    def set_gain_max(self, gain_max: float) -> None:
        """Plan the barrier with this actuator gain bound from now on (metres moved per metre commanded)."""
        self.gain_max = gain_max
        self.set_margin(self.margin_m)

    def set_margin(self, margin_m: float) -> None:
        """Keep ``margin_m`` inside the safe box from now on."""
        low = np.asarray(self.config.safe_box_low) + margin_m
        high = np.asarray(self.config.safe_box_high) - margin_m
        if not np.all(low < high):
            raise CalibrationError(f"the safe box is too small for a {margin_m:.4f} m probing margin")
        self.margin_m = margin_m
        self.limits = SafetyLimits(
            workspace_low=tuple(low),
            workspace_high=tuple(high),
            max_action=self.config.max_action,
            max_action_rate=self.config.max_action_rate,
            barrier_fraction=self.config.barrier_fraction,
            action_scale_m=self.scale,
            actuator_gain_max=self.gain_max,
            watchdog_hold_s=self.config.state_timeout_s,
            watchdog_stop_s=self.config.state_timeout_s,
        )

    def pending_m(self) -> np.ndarray:
        """Displacement (metres, nominal gain) of the last ``assumed_delay`` commands: still in flight."""
        in_flight = list(self._sent)[len(self._sent) - self.assumed_delay :] if self.assumed_delay else []
        return in_flight_displacement_m(np.array(in_flight), self.scale, AXES)

    # Messages --------------------------------------------------------------------------------------------
    def _next_seq(self) -> int:
        self._seq = seq_after(self._seq)  # 1..SEQ_MAX, wrapping to 1: the wire cannot carry a larger number
        return self._seq

    def _send(self, msg_type: type, **fields: Any) -> None:
        try:
            self.link.send(msg_type(seq=self._next_seq(), t_s=time.monotonic(), **fields))
        except LinkError as err:
            raise ProbeAbortError("dead_link", f"send failed: {err}") from err

    def _wait_state(self, timeout_s: float, want_flags: int = 0) -> StateMsg:
        deadline = time.monotonic() + timeout_s
        newest: StateMsg | None = None
        while newest is None:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise ProbeAbortError("dead_link", f"no fresh state within {timeout_s} s")
            try:
                messages = self.link.poll(remaining)
            except LinkError as err:
                raise ProbeAbortError("dead_link", f"receive failed: {err}") from err
            for msg in messages:
                if isinstance(msg, EStopMsg):
                    raise ProbeAbortError("estop", f"the robot sent an e-stop (reason {msg.reason})")
                if isinstance(msg, ErrorMsg):
                    if msg.code == ErrorCode.ESTOPPED:
                        raise ProbeAbortError("estop", f"the robot is e-stopped: {msg.text}")
                    raise ProbeAbortError("rejected_command", f"the robot reported error {msg.code}: {msg.text}")
                if not isinstance(msg, StateMsg):
                    continue
                if self._last_state_seq is not None and not seq_newer(msg.seq, self._last_state_seq):
                    continue  # a stale or repeated state (frozen sensor): keep waiting
                if want_flags and not msg.flags & want_flags:
                    continue
                self._last_state_seq = msg.seq
                newest = msg
        if newest.flags & ESTOP_FLAGS:
            raise ProbeAbortError("estop", f"the robot reports an active e-stop (flags {newest.flags:#x})")
        position = np.asarray(newest.state[self.position_slice], dtype=np.float64)
        if position.shape != (AXES,) or not np.all(np.isfinite(newest.state)):
            raise ProbeAbortError("bad_state", f"state {newest.state} is not a finite contract state")
        for name, cut, low, high in self._bounded:
            values = np.asarray(newest.state[cut], dtype=np.float64)
            if np.any(values < low) or np.any(values > high):
                raise ProbeAbortError(
                    "bad_state",
                    f"state field {name} = {values.tolist()} lies outside state_bounds [{low}, {high}]: the bounds "
                    "(the robot's model, e.g. its joint limits) or the robot's sensor are wrong; fix the one that is",
                )
        return newest

    def measure_rate(self, periods: int) -> float | None:
        """Send nothing for ``periods`` control periods (the arm at rest, holding; a robot holds by itself when
        commands stop) and judge the states that come unprompted: a lock-step robot sends none (it steps once per
        command: its rate is whoever commands it, None is returned); a free-running one sends one per step of its
        controller, whose clock must step at the contract's control period (``StateRateCheck``, as in the control
        loop), else ``ProbeAbortError`` ("rate_mismatch") names both rates. Returns the median period (seconds)."""
        period_s = self.contract.control_period_s
        deadline = time.monotonic() + periods * period_s
        states: list[StateMsg] = []
        while (remaining := deadline - time.monotonic()) > 0:
            try:
                messages = self.link.poll(remaining)
            except LinkError as err:
                raise ProbeAbortError("dead_link", f"receive failed: {err}") from err
            for msg in messages:
                if isinstance(msg, EStopMsg) or (isinstance(msg, StateMsg) and msg.flags & ESTOP_FLAGS):
                    raise ProbeAbortError("estop", "the robot e-stopped while the probe listened to its rate")
                fresh = self._last_state_seq is None or seq_newer(msg.seq, self._last_state_seq)
                if isinstance(msg, StateMsg) and fresh:
                    self._last_state_seq = msg.seq
                    states.append(msg)
        if len(states) < MIN_RATE_STATES:
            return None
        rate = StateRateCheck(period_s, window=len(states) - 1)
        for tick, msg in enumerate(states):
            rate.add(msg.seq, msg.t_s, tick)
        median_s = rate.median_interval_s
        if rate.mismatch():
            raise ProbeAbortError(
                "rate_mismatch",
                f"the robot steps every {median_s:.4f} s ({1.0 / median_s:.1f} Hz; median of its clock over "
                f"{len(states)} states it sent unprompted) but the policy contract's control period is {period_s} s "
                f"({1.0 / period_s:.1f} Hz): set the robot controller's rate to it, or train and export a policy for "
                "the rate the robot runs at",
            )
        self.measured_period_s = median_s
        return self.measured_period_s

    def _accept_position(self, position: np.ndarray) -> None:
        low = np.asarray(self.config.safe_box_low) - self.margin_m
        high = np.asarray(self.config.safe_box_high) + self.margin_m
        if np.any(position < low) or np.any(position > high):
            raise ProbeAbortError("unexpected_motion", f"the gripper is at {position}, outside the safe box")
        if np.all(np.isfinite(self.position)):
            jump = float(np.max(np.abs(position - self.position)))
            if jump > self.max_jump_m:
                raise ProbeAbortError("unexpected_motion", f"the gripper jumped {jump:.3f} m in one step")
        self.position = position
        self.log.positions_m.append(position)

    def home(self) -> np.ndarray:
        """Send HOME and wait for the first state after it; returns the start position. The time it took (the
        arm's homing motion and a round trip) is logged: the spec's ``homing_s``, which sizes the runtime's wait."""
        sent_t = time.monotonic()
        self._send(HomeMsg, seed=self.config.seed)
        state = self._wait_state(self.config.home_timeout_s, want_flags=StateFlags.HOMED)
        self.log.homing_s.append(time.monotonic() - sent_t)
        self._sent.clear()
        self.previous_action = self.contract.hold()
        position = np.asarray(state.state[self.position_slice], dtype=np.float64)
        inner_low = np.asarray(self.config.safe_box_low) + self.margin_m
        inner_high = np.asarray(self.config.safe_box_high) - self.margin_m
        if np.any(position < inner_low) or np.any(position > inner_high):
            raise ProbeAbortError("unexpected_motion", f"the home position {position} is outside the safe box")
        self.position = position
        self.log.positions_m.append(position)
        self.log.home_positions_m.append(position.copy())
        return position

    def step(self, displacement_units: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Filter, send one Cartesian command (units), wait for the next state.

        Returns (the displacement sent in metres, the new position in metres).
        """
        proposed = self.contract.hold()
        proposed[:AXES] = displacement_units
        pending = self.pending_m()
        result = filter_action(self.position, pending, proposed, self.previous_action, 0.0, self.limits)
        for reason in result.reasons:
            self.log.interventions[reason] = self.log.interventions.get(reason, 0) + 1
        action = result.action
        sent_m = action[:AXES] * self.scale
        self.log.commanded_positions_m.append(self.position + pending + sent_m)
        self.log.commands.append(action)
        self._send(CommandMsg, action=action)
        self._sent.append(action[:AXES].copy())
        self.previous_action = action
        state = self._wait_state(self.config.state_timeout_s)
        self._accept_position(np.asarray(state.state[self.position_slice], dtype=np.float64))
        return sent_m, self.position

    def hold(self, steps: int, check_rest: bool = False) -> np.ndarray:
        """Send ``steps`` hold commands; returns the positions seen [steps, 3].

        With ``check_rest`` the arm must stay still: a mean speed over ``rest_speed_window`` steps above
        ``max_rest_speed_m`` aborts (call it once the commands in flight have been applied).
        """
        zero = np.zeros(AXES)
        window = self.config.rest_speed_window
        positions = []
        for _ in range(steps):
            positions.append(self.step(zero)[1].copy())
            if check_rest and len(positions) > window:
                speed = float(np.max(np.abs(positions[-1] - positions[-1 - window]))) / window
                if speed > self.config.max_rest_speed_m:
                    raise ProbeAbortError(
                        "unexpected_motion", f"the arm moved {speed * 1000:.1f} mm per step while holding"
                    )
        return np.array(positions)

    def leave_holding(self) -> None:
        """Best effort: one hold command, no wait (the robot also holds by itself when commands stop)."""
        try:
            self.link.send(CommandMsg(seq=self._next_seq(), t_s=time.monotonic(), action=self.contract.hold()))
        except (LinkError, OSError) as err:
            logger.warning("could not send the final hold command: %s", err)
