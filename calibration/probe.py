"""Calibrate a robot through its wire link: delay, noise at rest, reachable workspace -> a calibration file.

Robot side only (numpy, deploy.wire, deploy.runtime.safety, calibration.*): it runs where the controller runs,
over the same link. The probe:

1. sends HOME and waits for the first state; the start must lie inside the safe box (minus a margin);
2. holds still for ``rest_steps`` and estimates the position noise per axis (second differences);
3. ``repeats`` times: a bounded random probing sequence on all three axes, then holds; the lag whose per-step
   motion best matches the commands is the delay (``calibration.measure.estimate_delay``);
4. toward each of the 6 faces of the safe box: constant small commands until the arm stops moving (a physical
   limit) or the barrier stops the commands (the safe box), then back to the start.

Every command goes through ``deploy.runtime.safety.filter_action`` with the safe box shrunk by a margin,
the commands still in flight counted, so no command can take the gripper outside the configured safe box.
The probe aborts (``ProbeAbortError``) on an e-stop, a dead link (no fresh state within ``state_timeout_s``), a
non-finite state or an unexpected motion (a jump no command can explain, motion while holding, leaving the
safe box); it then sends the hold command, so the robot is left holding.
"""

from __future__ import annotations

import logging
import math
import time
from collections import deque
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

from calibration.measure import (
    DelayEstimate,
    estimate_delay,
    probing_sequence,
    rest_noise_std,
    stalled,
    summarize_delays,
)
from calibration.schema import MAX_DELAY_STEPS, Calibration, CalibrationError, today
from deploy.contract import ObservationContract, fetch_reach_contract
from deploy.runtime.safety import SafetyLimits, filter_action
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
    seq_newer,
)

logger = logging.getLogger(__name__)

AXES = 3
FACES: tuple[tuple[int, float], ...] = tuple((axis, sign) for axis in range(AXES) for sign in (-1.0, 1.0))
ESTOP_FLAGS = StateFlags.ESTOP_ACTIVE | StateFlags.ESTOP_FROM_ROBOT
LIMITED_BY_SAFE_BOX = "safe_box"
LIMITED_BY_MOTION_STOP = "motion_stopped"
LIMITED_BY_STEP_BUDGET = "step_budget"
MARGIN_NOISE_SIGMAS = 4.0  # the probing margin grows to this many noise std once the noise is known
JUMP_COMMANDS = 2.0  # a one-step jump larger than this many full-size commands (+ noise allowance) is unexpected
JUMP_NOISE_SIGMAS = 10.0  # noise allowance of the jump check, in std of a position difference
RETURN_GAIN = 0.5  # share of the remaining distance commanded per step on the way back, divided by (delay + 1)


class ProbeAbortError(CalibrationError):
    """The probe stopped early; the robot was sent the hold command. ``reason``: estop | dead_link |
    bad_state | unexpected_motion | rejected_command."""

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
    :param seed: seed of the probing sequences (and of HOME).
    """

    safe_box_low: tuple[float, float, float]
    safe_box_high: tuple[float, float, float]
    robot_id: str = "robot"
    repeats: int = 5
    probe_steps: int = 64
    probe_amplitude: float = 0.3
    probe_excursion: float = 0.6
    rest_steps: int = 300
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
    seed: int = 0

    def __post_init__(self) -> None:
        low, high = np.asarray(self.safe_box_low, float), np.asarray(self.safe_box_high, float)
        if low.shape != (AXES,) or high.shape != (AXES,) or not np.all(low + 2 * self.margin_m < high):
            raise ValueError(
                f"safe box {list(low)} .. {list(high)} must be 3-D with low + 2 x margin_m ({self.margin_m} m) < high"
            )
        if self.settle_steps <= self.max_delay_steps:
            raise ValueError(f"settle_steps ({self.settle_steps}) must exceed max_delay_steps ({self.max_delay_steps})")
        for name in ("repeats", "probe_steps", "rest_steps", "face_max_steps", "stall_window", "rest_speed_window"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be >= 1, got {getattr(self, name)}")
        if not 0 <= self.max_delay_steps <= MAX_DELAY_STEPS:
            raise ValueError(f"max_delay_steps must be in 0..{MAX_DELAY_STEPS}, got {self.max_delay_steps}")


@dataclass
class ProbeLog:
    """Everything the probe sent and saw (for reports and tests). Positions in metres."""

    commanded_positions_m: list[np.ndarray] = field(default_factory=list)  # position + in flight + this command
    positions_m: list[np.ndarray] = field(default_factory=list)
    commands: list[np.ndarray] = field(default_factory=list)
    interventions: dict[str, int] = field(default_factory=dict)


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
        self._sent_m: deque[np.ndarray] = deque(maxlen=MAX_DELAY_STEPS)
        self.previous_action = contract.hold()
        self.max_jump_m = math.inf  # set once the noise is known
        self.noise_std_m = 0.0
        self.set_margin(config.margin_m)

    # Limits ----------------------------------------------------------------------------------------------
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
            watchdog_hold_s=self.config.state_timeout_s,
            watchdog_stop_s=self.config.state_timeout_s,
        )

    def pending_m(self) -> np.ndarray:
        """Displacement (metres) of the last ``assumed_delay`` commands: still in flight."""
        total = np.zeros(AXES)
        for sent in list(self._sent_m)[len(self._sent_m) - self.assumed_delay :] if self.assumed_delay else []:
            total += sent
        return total

    # Messages --------------------------------------------------------------------------------------------
    def _next_seq(self) -> int:
        self._seq += 1
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
        return newest

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
        """Send HOME and wait for the first state after it; returns the start position."""
        self._send(HomeMsg, seed=self.config.seed)
        state = self._wait_state(self.config.home_timeout_s, want_flags=StateFlags.HOMED)
        self._sent_m.clear()
        self.previous_action = self.contract.hold()
        position = np.asarray(state.state[self.position_slice], dtype=np.float64)
        inner_low = np.asarray(self.config.safe_box_low) + self.margin_m
        inner_high = np.asarray(self.config.safe_box_high) - self.margin_m
        if np.any(position < inner_low) or np.any(position > inner_high):
            raise ProbeAbortError("unexpected_motion", f"the home position {position} is outside the safe box")
        self.position = position
        self.log.positions_m.append(position)
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
        self._sent_m.append(sent_m)
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


@dataclass
class ProbeReport:
    """What one calibration run measured."""

    delay_lags: list[int]
    delay_gains: list[float]
    delay_significance: list[float]
    noise_std_m: list[float]
    reach_low: list[float]
    reach_high: list[float]
    limited_by: dict[str, str]
    workspace_low: list[float]
    workspace_high: list[float]
    interventions: dict[str, int]


def measure_noise(session: ProbeSession) -> np.ndarray:
    """Hold still; per-axis position noise std (metres). Aborts if the arm moves while holding."""
    config = session.config
    session.hold(config.settle_steps)
    return rest_noise_std(session.hold(config.rest_steps, check_rest=True))


def measure_delays(session: ProbeSession) -> list[DelayEstimate]:
    """``repeats`` cross-correlation delay measurements; returns their ``DelayEstimate``s."""
    config = session.config
    rng = np.random.default_rng(config.seed)
    estimates = []
    for _ in range(config.repeats):
        session.hold(config.settle_steps)
        sequence = probing_sequence(config.probe_steps, AXES, config.probe_amplitude, config.probe_excursion, rng)
        tail = np.zeros((config.max_delay_steps + 1, AXES))
        sent, positions = [], [session.position.copy()]
        for command in np.vstack([sequence, tail]):
            sent_m, position = session.step(command)
            sent.append(sent_m)
            positions.append(position.copy())
        estimate = estimate_delay(np.array(sent), np.array(positions), config.max_delay_steps)
        if not estimate.reliable:
            raise CalibrationError(
                f"delay measurement unreliable (gain {estimate.gains[estimate.lag_steps]:.3f}, significance "
                f"{estimate.significance:.1f}, peak ratio {estimate.peak_ratio:.1f}); raise probe_amplitude or "
                f"probe_steps, or check that the robot moves when commanded"
            )
        estimates.append(estimate)
    return estimates


def probe_face(session: ProbeSession, axis: int, sign: float, start: np.ndarray) -> tuple[float, str]:
    """Move toward one face until the arm stops or the barrier stops the commands; then return to ``start``.

    Returns (the coordinate reached on ``axis`` in metres, what limited it).
    """
    config = session.config
    delay = session.assumed_delay
    command = np.zeros(AXES)
    command[axis] = sign * config.face_amplitude
    along: list[float] = [sign * session.position[axis]]
    applied: list[float] = []
    limited_by = LIMITED_BY_STEP_BUDGET
    for _ in range(config.face_max_steps):
        sent_m, position = session.step(command)
        applied.append(sign * sent_m[axis])
        along.append(sign * position[axis])
        if abs(sent_m[axis]) < config.min_face_command * session.scale:
            limited_by = LIMITED_BY_SAFE_BOX
            break
        if stalled(
            along,
            applied,
            config.stall_window,
            delay,
            session.noise_std_m,
            config.stall_ratio,
            config.stall_min_applied_m,
        ):
            limited_by = LIMITED_BY_MOTION_STOP
            break
    session.hold(delay + 1)
    window = config.stall_window
    reached = sign * (float(np.mean(along[-window:])) if limited_by == LIMITED_BY_MOTION_STOP else float(np.max(along)))
    return_to(session, start)
    return reached, limited_by


def return_to(session: ProbeSession, target: np.ndarray) -> None:
    """Proportional moves back to ``target`` (through the filter), then hold until the delay line is empty."""
    config = session.config
    gain = RETURN_GAIN / (session.assumed_delay + 1)  # slow enough not to overshoot with commands in flight
    for _ in range(config.face_max_steps):
        error = target - session.position - session.pending_m()
        if np.max(np.abs(target - session.position)) < config.return_tolerance_m:
            break
        session.step(np.clip(gain * error / session.scale, -config.face_amplitude, config.face_amplitude))
    session.hold(session.assumed_delay + 1)


def calibrate(
    link: Link,
    config: ProbeConfig,
    contract: ObservationContract | None = None,
    session: ProbeSession | None = None,
) -> tuple[Calibration, ProbeReport]:
    """Run the whole probe over ``link``; returns the calibration to save and the detailed report.

    The robot is left holding, also when the probe aborts (``ProbeAbortError``) or fails.
    """
    contract = contract or fetch_reach_contract(0)
    session = session or ProbeSession(link, contract, config)
    try:
        start = session.home()
        logger.info("calibration: homed; measuring the noise at rest")
        noise = measure_noise(session)
        session.noise_std_m = float(np.max(noise))
        session.set_margin(max(config.margin_m, MARGIN_NOISE_SIGMAS * session.noise_std_m))
        max_command_m = config.max_action * session.scale
        noise_allowance_m = JUMP_NOISE_SIGMAS * math.sqrt(2.0) * session.noise_std_m
        session.max_jump_m = JUMP_COMMANDS * max_command_m + noise_allowance_m + config.margin_m
        logger.info("calibration: %d delay probes", config.repeats)
        estimates = measure_delays(session)
        delay, spread, agreeing = summarize_delays([e.lag_steps for e in estimates])
        session.assumed_delay = delay
        reach_low = list(config.safe_box_low)
        reach_high = list(config.safe_box_high)
        workspace_low = list(session.limits.workspace_low)
        workspace_high = list(session.limits.workspace_high)
        limited: dict[str, str] = {}
        return_to(session, start)
        logger.info("calibration: delay %d steps; probing the workspace faces", delay)
        for axis, sign in FACES:
            reached, why = probe_face(session, axis, sign, start)
            name = f"{'xyz'[axis]}_{'high' if sign > 0 else 'low'}"
            limited[name] = why
            if sign > 0:
                reach_high[axis] = reached
                if why != LIMITED_BY_SAFE_BOX:
                    workspace_high[axis] = min(workspace_high[axis], reached - session.margin_m)
            else:
                reach_low[axis] = reached
                if why != LIMITED_BY_SAFE_BOX:
                    workspace_low[axis] = max(workspace_low[axis], reached + session.margin_m)
        if not all(lo < hi for lo, hi in zip(workspace_low, workspace_high, strict=True)):
            raise CalibrationError(f"the measured workspace {workspace_low} .. {workspace_high} is empty")
    finally:
        session.leave_holding()

    report = ProbeReport(
        delay_lags=[e.lag_steps for e in estimates],
        delay_gains=[e.gains[e.lag_steps] for e in estimates],
        delay_significance=[e.significance for e in estimates],
        noise_std_m=[float(v) for v in noise],
        reach_low=reach_low,
        reach_high=reach_high,
        limited_by=limited,
        workspace_low=workspace_low,
        workspace_high=workspace_high,
        interventions=dict(session.log.interventions),
    )
    period = contract.control_period_s
    calibration = Calibration(
        robot_id=config.robot_id,
        date=today(),
        control_period_s=period,
        delay_steps=delay,
        delay_ms=delay * period * 1000.0,
        delay_spread_steps=spread,
        delay_range=(delay, delay),
        observation_noise_std_m=tuple(float(v) for v in noise),  # type: ignore[arg-type]
        workspace_low=tuple(workspace_low),  # type: ignore[arg-type]
        workspace_high=tuple(workspace_high),  # type: ignore[arg-type]
        max_action=config.max_action,
        max_action_rate=config.max_action_rate,
        barrier_fraction=config.barrier_fraction,
        measurements={
            "delay_runs_steps": report.delay_lags,
            "delay_agreeing_runs": agreeing,
            "delay_gain": [round(g, 4) for g in report.delay_gains],
            "delay_significance": [round(s, 1) for s in report.delay_significance],
            "reach_low_m": [round(v, 4) for v in reach_low],
            "reach_high_m": [round(v, 4) for v in reach_high],
            "reach_limited_by": limited,
            "safe_box_low_m": list(config.safe_box_low),
            "safe_box_high_m": list(config.safe_box_high),
            "probe": {k: v for k, v in asdict(config).items() if k not in ("safe_box_low", "safe_box_high")},
        },
    )
    return calibration, report
