"""Calibrate a robot through its wire link: delay, gain, noise at rest, reachable workspace -> a robot spec file.

Robot side only (numpy, deploy.wire, deploy.runtime.safety, calibration.*): it runs where the controller runs,
over the same link. The probe:

1. sends HOME and waits for the first state; the start must lie inside the safe box (minus a margin); then sends
   nothing for ``rate_listen_periods`` control periods: a free-running robot's unprompted states must step at the
   contract's control period (``ProbeSession.measure_rate``; a lock-step robot sends none);
2. holds still for ``rest_steps`` and estimates the position noise per axis (second differences);
3. ``repeats`` times: a bounded random probing sequence on all three axes, then holds; the lag whose per-step
   motion best matches the commands is the delay (``calibration.measure.estimate_delay``); on the same moves,
   once the delay is known, the per-axis actuator gain (``calibration.measure.estimate_gain``): its mean over the
   repeats, its spread, and the upper bound the barrier will plan with (mean + ``GAIN_SPREADS`` spreads, times
   ``1 + GAIN_MARGIN``); the plausible speed follows from that bound (``PLAUSIBLE_SPEED_FACTOR`` x the fastest
   step it allows);
4. toward each of the 6 faces of the safe box: constant small commands until the arm stops moving (a physical
   limit) or the barrier stops the commands (the safe box), then back to the start;
5. the home pose: the arm is homed at the start, after the delay probes and after the faces (each time from
   somewhere else); the spec's ``home.position_m`` is the mean of the three HOMED positions and
   ``home.tolerance_m`` their largest distance from it plus ``HOME_MARGIN_M``. The runtime refuses a HOMED state
   further away than that (a glitch it would otherwise plan the episode's first command from).

Every command goes through ``deploy.runtime.safety.filter_action`` with the safe box shrunk by a margin,
the commands still in flight counted, so no command can take the gripper outside the configured safe box.
The probe aborts (``ProbeAbortError``) on an e-stop, a dead link (no fresh state within ``state_timeout_s``), a
non-finite state or an unexpected motion (a jump no command can explain, motion while holding, leaving the
safe box); it then sends the hold command, so the robot is left holding.
"""

from __future__ import annotations

import logging
import math
from dataclasses import asdict, dataclass

import numpy as np

from calibration.measure import (
    DelayEstimate,
    estimate_delay,
    estimate_gain,
    probing_sequence,
    rest_noise_std,
    stalled,
    summarize_delays,
)
from calibration.probe_session import AXES, CalibrationError, ProbeConfig, ProbeSession
from deploy.contract import ObservationContract, fetch_reach_contract
from deploy.robot_spec import RobotSpec
from deploy.robot_spec_sections import MAX_HOME_TOLERANCE_M, today
from deploy.wire import Link

logger = logging.getLogger(__name__)

FACES: tuple[tuple[int, float], ...] = tuple((axis, sign) for axis in range(AXES) for sign in (-1.0, 1.0))
LIMITED_BY_SAFE_BOX = "safe_box"
LIMITED_BY_MOTION_STOP = "motion_stopped"
LIMITED_BY_STEP_BUDGET = "step_budget"
MARGIN_NOISE_SIGMAS = 4.0  # the probing margin grows to this many noise std once the noise is known
JUMP_COMMANDS = 2.0  # a one-step jump larger than this many full-size commands (+ noise allowance) is unexpected
JUMP_NOISE_SIGMAS = 10.0  # noise allowance of the jump check, in std of a position difference
RETURN_GAIN = 0.5  # share of the remaining distance commanded per step on the way back, divided by (delay + 1)
GAIN_SPREADS = 2.0  # the gain bound covers the mean plus this many spreads (std over repeats) ...
GAIN_MARGIN = 0.1  # ... times 1 + this margin
HOMING_RESOLUTION_S = 0.001  # the measured homing time is rounded up to whole milliseconds
HOME_MARGIN_M = 0.005  # metres a HOMED state may lie beyond the spread the probe's homings showed
HOME_DIGITS = 4  # the home position is written to 0.1 mm
PROBE_KEYS_IN_THE_SPEC = ("safe_box_low", "safe_box_high", "state_bounds")  # recorded elsewhere in the spec file
PLAUSIBLE_SPEED_FACTOR = 1.5  # plausible speed = this x the fastest step the gain bound allows (momentum, noise)


@dataclass
class ProbeReport:
    """What one calibration run measured."""

    delay_lags: list[int]
    delay_gains: list[float]
    gains_per_axis: list[list[float]]  # one row per repeat: metres moved per metre commanded, x y z
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


@dataclass(frozen=True)
class ProbeMoves:
    """One probing sequence: the displacements sent (metres, nominal) and the positions seen (metres)."""

    sent_m: np.ndarray
    positions_m: np.ndarray


def measure_delays(session: ProbeSession) -> tuple[list[DelayEstimate], list[ProbeMoves]]:
    """``repeats`` cross-correlation delay measurements; returns their ``DelayEstimate``s and the moves."""
    config = session.config
    rng = np.random.default_rng(config.seed)
    estimates = []
    moves = []
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
        moves.append(ProbeMoves(np.array(sent), np.array(positions)))
    return estimates, moves


def measure_gains(moves: list[ProbeMoves], delay: int) -> np.ndarray:
    """Per-repeat, per-axis actuator gains ``[repeats, 3]`` from the probing moves, at the measured delay."""
    return np.array([estimate_gain(m.sent_m, m.positions_m, delay) for m in moves])


def gain_upper_bound(gains: np.ndarray) -> float:
    """The gain the barrier plans with: the largest per-axis mean + ``GAIN_SPREADS`` spreads, plus the margin."""
    mean, spread = gains.mean(axis=0), gains.std(axis=0)
    return float(np.max(mean + GAIN_SPREADS * spread) * (1.0 + GAIN_MARGIN))


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


def home_pose(positions_m: list[np.ndarray]) -> tuple[tuple[float, float, float], float]:
    """(the mean HOMED position, its tolerance): the largest distance of a homing from the mean plus
    ``HOME_MARGIN_M``, in metres. A robot whose homings spread over more than the spec allows has no home pose
    to check against: ``CalibrationError`` says so."""
    homes = np.array(positions_m)
    mean = homes.mean(axis=0)
    spread = float(np.max(np.linalg.norm(homes - mean, axis=1)))
    tolerance = round(spread + HOME_MARGIN_M, HOME_DIGITS)
    if tolerance > MAX_HOME_TOLERANCE_M:
        raise CalibrationError(
            f"the robot's {len(homes)} homings ended up to {spread:.3f} m apart from their mean "
            f"{mean.round(4).tolist()}: no home pose to check HOMED states against; check the robot's homing "
            "(it must return to one pose)"
        )
    x, y, z = (round(float(v), HOME_DIGITS) for v in mean)
    return (x, y, z), tolerance


def calibrate(
    link: Link,
    config: ProbeConfig,
    contract: ObservationContract | None = None,
    session: ProbeSession | None = None,
) -> tuple[RobotSpec, ProbeReport]:
    """Run the whole probe over ``link``; returns the robot spec to save and the detailed report.

    The robot is left holding, also when the probe aborts (``ProbeAbortError``) or fails.
    """
    contract = contract or fetch_reach_contract(0)
    session = session or ProbeSession(link, contract, config)
    try:
        start = session.home()
        if session.measure_rate(config.rate_listen_periods) is None:
            logger.info("calibration: homed; a lock-step robot (no state unprompted); measuring the noise at rest")
        else:
            logger.info("calibration: homed; the robot steps every %.4f s; noise at rest", session.measured_period_s)
        noise = measure_noise(session)
        session.noise_std_m = float(np.max(noise))
        session.set_margin(max(config.margin_m, MARGIN_NOISE_SIGMAS * session.noise_std_m))
        max_command_m = config.max_action * session.scale
        noise_allowance_m = JUMP_NOISE_SIGMAS * math.sqrt(2.0) * session.noise_std_m
        session.max_jump_m = JUMP_COMMANDS * max_command_m + noise_allowance_m + config.margin_m
        logger.info("calibration: %d delay probes", config.repeats)
        estimates, moves = measure_delays(session)
        delay, spread, agreeing = summarize_delays([e.lag_steps for e in estimates])
        session.assumed_delay = delay
        gains = measure_gains(moves, delay)
        gain_max = gain_upper_bound(gains)
        if not np.all(gains.mean(axis=0) > 0):
            raise CalibrationError(
                f"measured actuator gains {gains.mean(axis=0).round(3).tolist()} are not all positive: the arm does "
                "not follow the commands on every axis; check the robot's command frame and sign conventions"
            )
        session.set_gain_max(gain_max)
        start = session.home()  # from wherever the delay probes left the arm: the home is measured again
        reach_low = list(config.safe_box_low)
        reach_high = list(config.safe_box_high)
        workspace_low = list(session.limits.workspace_low)
        workspace_high = list(session.limits.workspace_high)
        limited: dict[str, str] = {}
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
        session.home()
        home_position, home_tolerance = home_pose(session.log.home_positions_m)
    finally:
        session.leave_holding()

    report = ProbeReport(
        delay_lags=[e.lag_steps for e in estimates],
        delay_gains=[e.gains[e.lag_steps] for e in estimates],
        gains_per_axis=gains.round(4).tolist(),
        delay_significance=[e.significance for e in estimates],
        noise_std_m=[float(v) for v in noise],
        reach_low=reach_low,
        reach_high=reach_high,
        limited_by=limited,
        workspace_low=workspace_low,
        workspace_high=workspace_high,
        interventions=dict(session.log.interventions),
    )
    period = contract.control_period_s  # measure_rate aborted the probe if the robot steps at another period
    measured_period = session.measured_period_s
    scale = contract.action_scale_m
    gain_mean, gain_spread = gains.mean(axis=0), gains.std(axis=0)
    spec = RobotSpec(
        robot_id=config.robot_id,
        date=today(),
        control_period_s=period,
        delay_steps=delay,
        delay_ms=delay * period * 1000.0,
        delay_spread_steps=spread,
        delay_range=(delay, delay),
        command_scale_m=scale,
        actuator_gain=tuple(round(float(v), 4) for v in gain_mean),  # type: ignore[arg-type]
        actuator_gain_spread=tuple(round(float(v), 4) for v in gain_spread),  # type: ignore[arg-type]
        actuator_gain_max=round(gain_max, 4),
        plausible_speed_m_s=round(PLAUSIBLE_SPEED_FACTOR * config.max_action * scale * gain_max / period, 4),
        homing_s=round(math.ceil(max(session.log.homing_s) / HOMING_RESOLUTION_S) * HOMING_RESOLUTION_S, 3),
        home_position_m=home_position,
        home_tolerance_m=home_tolerance,
        state_bounds=config.state_bounds,
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
            "gain_runs_per_axis": report.gains_per_axis,
            "reach_low_m": [round(v, 4) for v in reach_low],
            "reach_high_m": [round(v, 4) for v in reach_high],
            "reach_limited_by": limited,
            "homing_runs_s": [round(t, 4) for t in session.log.homing_s],
            # the robot clock's median step (None: a lock-step robot, stepping once per command)
            "state_period_s": None if measured_period is None else round(measured_period, 5),
            "home_runs_m": [[round(float(v), HOME_DIGITS) for v in p] for p in session.log.home_positions_m],
            "safe_box_low_m": list(config.safe_box_low),
            "safe_box_high_m": list(config.safe_box_high),
            "probe": {k: v for k, v in asdict(config).items() if k not in PROBE_KEYS_IN_THE_SPEC},
        },
    )
    return spec, report
