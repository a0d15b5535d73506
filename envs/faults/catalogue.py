"""Every fault kind of the library with how its parameters are drawn, and fault schedules drawn from a seeded
generator (the fault campaign's robot side).

Durations and starts are in robot ticks (messages received, about one per control period). Parameters in time are
drawn in control periods of the loop (``period_s``), so a campaign run faster than the robot's real period
meets the same faults per tick. ``within_spec=True`` draws only faults, and parameters, that the robot spec allows
(noise up to the spec's, reply latency that with one period of waiting stays below the watchdog's hold time, gain
in the calibrated range).
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np

from deploy.robot_spec import RobotSpec
from envs.faults.actuator import GAIN_SPREAD_SIGMAS, MotorGain, MotorStall
from envs.faults.base import RobotFault
from envs.faults.clock import ClockDrift, ClockJump, SequenceJump
from envs.faults.link import ByteCorruption, DropFrames, DuplicateFrames, LateFrames, LinkOutage, ReplyLatency
from envs.faults.robot import ControllerReboot, EStopIgnored, FakeHomed, RobotEStop, StrayHomed, UnpromptedHome
from envs.faults.schedule import ScheduledFault
from envs.faults.sensor import (
    FrozenSender,
    NanState,
    SensorDrift,
    SensorFreeze,
    SensorNoise,
    SensorOffset,
    SensorScale,
)

SEED_RANGE = 2**31  # seeds handed to the faults' own generators
OUT_OF_SPEC_NOISE_M = (0.005, 0.03)  # noise std drawn when the spec's noise is exceeded (metres)


class DrawContext:
    """What the parameter draws need: the generator, the robot spec, the loop period (seconds)."""

    def __init__(self, rng: np.random.Generator, spec: RobotSpec, period_s: float) -> None:
        self.rng = rng
        self.spec = spec
        self.period_s = float(period_s)

    def seed(self) -> int:
        return int(self.rng.integers(SEED_RANGE))

    def direction(self) -> np.ndarray:
        v = self.rng.normal(size=3)
        return v / max(float(np.linalg.norm(v)), 1e-9)

    def signed(self, low: float, high: float) -> float:
        return float(self.rng.choice([-1.0, 1.0]) * self.rng.uniform(low, high))


def _noise(c: DrawContext, within: bool) -> RobotFault:
    spec_std = min(c.spec.observation_noise_std_m)
    std = (
        c.rng.uniform(0.0, spec_std)
        if within
        else c.rng.uniform(max(2 * spec_std, OUT_OF_SPEC_NOISE_M[0]), OUT_OF_SPEC_NOISE_M[1])
    )
    return SensorNoise(std, c.seed())


def _gain(c: DrawContext, within: bool) -> RobotFault:
    if within:
        low = max(
            (g - GAIN_SPREAD_SIGMAS * s) / g
            for g, s in zip(c.spec.actuator_gain, c.spec.actuator_gain_spread, strict=True)
        )
        high = min(c.spec.actuator_gain_max / g for g in c.spec.actuator_gain)
        return MotorGain(c.rng.uniform(low, high))
    return MotorGain(c.rng.choice([c.rng.uniform(0.1, 0.8), c.rng.uniform(1.25, 2.0)]))


def _latency(c: DrawContext, within: bool) -> RobotFault:
    hold_periods = c.spec.watchdog_hold_s / c.period_s
    if within:  # a state waits up to one more period for the tick that uses it
        return ReplyLatency(int(c.rng.integers(1, max(2, math.ceil(hold_periods) - 1))))
    stop_periods = c.spec.watchdog_stop_s / c.period_s
    return ReplyLatency(int(c.rng.integers(max(1, math.ceil(hold_periods) - 1), math.ceil(3 * stop_periods) + 1)))


# kind -> draw(context, within_spec); the kinds that have a within-spec form are in WITHIN_SPEC_KINDS
DRAWS: dict[str, Callable[[DrawContext, bool], RobotFault]] = {
    "sensor_freeze": lambda c, w: SensorFreeze(),
    "sensor_offset": lambda c, w: SensorOffset(tuple(c.direction() * c.rng.uniform(0.005, 0.1))),
    "sensor_drift": lambda c, w: SensorDrift(tuple(c.direction() * c.rng.uniform(0.0005, 0.005))),
    "sensor_scale": lambda c, w: SensorScale(c.rng.choice([c.rng.uniform(0.0, 0.6), c.rng.uniform(1.5, 3.0)])),
    "sensor_noise": _noise,
    "nan_state": lambda c, w: NanState(),
    "frozen_sender": lambda c, w: FrozenSender(),
    "motor_stall": lambda c, w: MotorStall(),
    "motor_gain": _gain,
    "link_outage": lambda c, w: LinkOutage(),
    "byte_corruption": lambda c, w: ByteCorruption(c.rng.uniform(0.001, 0.02)),
    "reply_latency": _latency,
    "drop_frames": lambda c, w: DropFrames(c.rng.uniform(0.05, 0.5), c.seed()),
    "duplicate_frames": lambda c, w: DuplicateFrames(c.rng.uniform(0.05, 0.5), c.seed()),
    "late_frames": lambda c, w: LateFrames(c.rng.uniform(0.05, 0.3), c.seed(), int(c.rng.integers(1, 5))),
    "clock_jump": lambda c, w: ClockJump(c.signed(1.0, 100.0) * c.period_s),
    "clock_drift": lambda c, w: ClockDrift(c.signed(0.01, 0.5)),
    "sequence_jump": lambda c, w: SequenceJump(int(c.rng.integers(2, 1000))),
    "controller_reboot": lambda c, w: ControllerReboot(),
    "estop_ignored": lambda c, w: EStopIgnored(),
    "fake_homed": lambda c, w: FakeHomed(),
    "stray_homed": lambda c, w: StrayHomed(int(c.rng.integers(1, 4))),
    "robot_estop": lambda c, w: RobotEStop(),
    "unprompted_home": lambda c, w: UnpromptedHome(),
}
FAULT_KINDS = tuple(DRAWS)
WITHIN_SPEC_KINDS = ("sensor_noise", "motor_gain", "reply_latency")


def draw_fault(kind: str, context: DrawContext, within_spec: bool = False) -> RobotFault:
    """One fault of ``kind`` with drawn parameters (the spec-allowed form if ``within_spec``)."""
    if kind not in DRAWS:
        raise ValueError(f"unknown fault kind {kind!r}; known: {', '.join(FAULT_KINDS)}")
    if within_spec and kind not in WITHIN_SPEC_KINDS:
        raise ValueError(f"{kind} has no form the robot spec allows; those that do: {', '.join(WITHIN_SPEC_KINDS)}")
    return DRAWS[kind](context, within_spec)


def draw_schedule(
    context: DrawContext, n_faults: int, horizon_ticks: int, max_duration_ticks: int, within_spec: bool = False
) -> list[ScheduledFault]:
    """``n_faults`` faults of kinds drawn uniformly, each starting at a tick in [0, horizon_ticks) and lasting
    1..``max_duration_ticks`` robot ticks."""
    kinds = WITHIN_SPEC_KINDS if within_spec else FAULT_KINDS
    out = []
    for _ in range(n_faults):
        kind = str(context.rng.choice(kinds))
        fault = draw_fault(kind, context, within_spec)
        start = int(context.rng.integers(0, horizon_ticks))
        duration = int(context.rng.integers(1, max_duration_ticks + 1))
        out.append(ScheduledFault(fault, start, duration))
    return out
