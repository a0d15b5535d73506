"""The safety filter between the policy and the robot: a pure function, run once per control tick.

``filter_action(position_m, pending_displacement_m, proposed, previous_action, state_age_s, limits)`` returns
the action to send and the reasons it differs from the proposal. In order, first match wins for the holds:

1. watchdog: state older than ``watchdog_stop_s`` -> hold and ``stop=True`` (the loop sends e-stop); older
   than ``watchdog_hold_s`` -> hold. A NaN age counts as infinitely old.
2. NaN/inf in the measured position or the in-flight displacement -> hold; in the proposed action -> hold.
3. clip every component to [-max_action, max_action];
4. rate limit: each component moves at most ``max_action_rate`` from the previous action sent;
5. workspace barrier on the Cartesian components (the first ``len(workspace_low)``): the arm moves
   ``g x action_scale_m x a`` metres for a command ``a``, with its actuator gain ``g`` anywhere in
   ``(0, actuator_gain_max]`` (the robot spec's upper bound). The barrier plans with ``g_max = barrier_gain_margin
   x actuator_gain_max``: a motor faster than its spec (campaign seed 1000237: 2x the calibrated gain drove the arm
   1 cm past a face before ``exceeds_gain`` could tell) stays inside up to about that margin (with the barrier's
   fraction, the campaign's 2x nominal). Per face, the filter takes the worst case: for the high face
   ``F = p_high + g_max x max(pending, 0)`` (where the gripper may end once the commands in flight, and the newest
   applied, which the arm may still lag, are applied; ``p_high`` is the upper end of where the gripper may be now),
   and the next command closes at most ``barrier_fraction`` of the gap
   ``h = high - F``: ``g_max x action_scale_m x a <= barrier_fraction x h``. The low face mirrors it. So the
   gripper approaches each face by at most ``barrier_fraction`` of the remaining gap per step and stays inside the
   box for any gain up to the bound (motion in flight away from a face is not
   counted on: with a small gain it may not happen). If ``F`` is already outside on an axis (noise, a push), motion
   further out on that axis is forbidden (reason ``outside_workspace``); the filter does not move the arm back.
   ``position_bounds_m`` (low, high) lets the caller say the true position is uncertain (an unconfirmed state,
   measurement noise): the barrier then plans from the bound nearest each face.

The barrier runs last, so it wins over the rate limit (an abrupt stop is safe for a displacement command).
The hold command is all zeros: zero displacement, the arm stays where it is.

Fast path: the state and actions are a handful of numbers, so the arithmetic runs on Python floats (one
``tolist()`` each) rather than on tiny numpy arrays; ``benchmarks/safety_filter.py`` measures a call.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

import numpy as np

from deploy.contract import ObservationContract
from deploy.robot_spec import DEFAULT_WATCHDOG_HOLD_S, DEFAULT_WATCHDOG_STOP_S, RobotSpec
from deploy.runtime.compatibility import convention_mismatches

# Intervention reasons (also the keys of InterventionCounter and of the tick log).
STALE_STOP = "stale_stop"
STALE_HOLD = "stale_hold"
NAN_STATE = "nan_state"
NAN_ACTION = "nan_action"
NAN_PREVIOUS = "nan_previous"
CLIP = "clip"
RATE_LIMIT = "rate_limit"
WORKSPACE_BARRIER = "workspace_barrier"
OUTSIDE_WORKSPACE = "outside_workspace"
# Holds the control loop decides before the filter runs (the state or the policy cannot be used this tick).
IMPLAUSIBLE_STATE = "implausible_state"  # the state failed its plausibility check (deploy.runtime.state_check)
ROBOT_RESTART = "robot_restart"  # the robot's clock and sequence started over: hold, then re-home
UNREQUESTED_HOME = "unrequested_home"  # the robot homed by itself mid-episode (no HOME asked): hold, then re-home
POLICY_FAULT = "policy_fault"  # the policy returned NaN/inf, raised, or overran the period
REASONS: tuple[str, ...] = (
    STALE_STOP,
    STALE_HOLD,
    NAN_STATE,
    NAN_ACTION,
    NAN_PREVIOUS,
    CLIP,
    RATE_LIMIT,
    WORKSPACE_BARRIER,
    OUTSIDE_WORKSPACE,
    IMPLAUSIBLE_STATE,
    ROBOT_RESTART,
    UNREQUESTED_HOME,
    POLICY_FAULT,
)
HOLD_REASONS: frozenset[str] = frozenset(
    {STALE_STOP, STALE_HOLD, NAN_STATE, NAN_ACTION, IMPLAUSIBLE_STATE, ROBOT_RESTART, UNREQUESTED_HOME, POLICY_FAULT}
)


def _floats(values: Any, name: str, size: int | None = None) -> list[float]:
    """A list of Python floats from a numpy array or a sequence (checked length when ``size`` is given)."""
    if isinstance(values, np.ndarray):
        if values.ndim != 1:
            raise ValueError(f"{name} must be a 1-D vector, got shape {values.shape}")
        out = values.tolist()
    else:
        out = list(map(float, values))
    if size is not None and len(out) != size:
        raise ValueError(f"{name} must have {size} values, got {len(out)}")
    return out


def _finite(values: Sequence[float]) -> bool:
    return all(map(math.isfinite, values))  # map: no Python frame per value (this runs several times per tick)


@dataclass(frozen=True)
class SafetyLimits:
    """What the filter enforces. Units: metres, command units, seconds.

    :param workspace_low: lower corner of the box the commanded gripper position stays in (metres).
    :param workspace_high: upper corner (metres).
    :param max_action: bound on |action| per component (command units).
    :param max_action_rate: largest change of one component between ticks (command units per control step).
    :param barrier_fraction: share of the remaining gap to a face the gripper may close per step, in (0, 1].
    :param action_scale_m: metres of displacement per command unit per control step (the contract's).
    :param actuator_gain_max: upper bound of the arm's actuator gain (metres moved per metre commanded): the
        barrier plans with it, so any gain up to it keeps the arm inside (the robot spec's upper bound).
    :param barrier_gain_margin: the barrier plans with ``barrier_gain_margin x actuator_gain_max`` (>= 1): a motor
        faster than its calibrated bound by up to that factor still stays inside until the state checks catch it
        (``exceeds_gain``); the robot spec's ``limits.barrier_gain_margin``.
    :param watchdog_hold_s: state older than this (seconds) -> hold.
    :param watchdog_stop_s: state older than this (seconds) -> hold and safe stop (e-stop).
    """

    workspace_low: tuple[float, ...]
    workspace_high: tuple[float, ...]
    max_action: float = 1.0
    max_action_rate: float = 0.5
    barrier_fraction: float = 0.5
    action_scale_m: float = 0.05
    actuator_gain_max: float = 1.0
    barrier_gain_margin: float = 1.0
    watchdog_hold_s: float = DEFAULT_WATCHDOG_HOLD_S
    watchdog_stop_s: float = DEFAULT_WATCHDOG_STOP_S

    def __post_init__(self) -> None:
        low = tuple(float(v) for v in self.workspace_low)
        high = tuple(float(v) for v in self.workspace_high)
        object.__setattr__(self, "workspace_low", low)
        object.__setattr__(self, "workspace_high", high)
        if len(low) != len(high) or not low:
            raise ValueError(f"workspace_low {low} and workspace_high {high} must have the same, non-zero length")
        for axis, (lo, hi) in enumerate(zip(low, high, strict=True)):
            if not (math.isfinite(lo) and math.isfinite(hi) and lo < hi):
                raise ValueError(f"workspace axis {axis}: low {lo} must be finite and below high {hi} (metres)")
        checks = (
            ("max_action", self.max_action),
            ("max_action_rate", self.max_action_rate),
            ("action_scale_m", self.action_scale_m),
            ("actuator_gain_max", self.actuator_gain_max),
            ("watchdog_hold_s", self.watchdog_hold_s),
            ("watchdog_stop_s", self.watchdog_stop_s),
        )
        for name, value in checks:
            if not (math.isfinite(value) and value > 0):
                raise ValueError(f"{name} must be a finite number > 0, got {value}")
        if not 0.0 < self.barrier_fraction <= 1.0:
            raise ValueError(f"barrier_fraction must be in (0, 1], got {self.barrier_fraction}")
        if not (math.isfinite(self.barrier_gain_margin) and self.barrier_gain_margin >= 1.0):
            raise ValueError(f"barrier_gain_margin must be a finite number >= 1, got {self.barrier_gain_margin}")
        if self.watchdog_stop_s < self.watchdog_hold_s:
            raise ValueError(
                f"watchdog_stop_s ({self.watchdog_stop_s} s) must be >= watchdog_hold_s ({self.watchdog_hold_s} s)"
            )

    @property
    def position_dims(self) -> int:
        """How many leading action components are a Cartesian displacement (the box's dimensions)."""
        return len(self.workspace_low)

    @classmethod
    def from_spec(
        cls,
        spec: RobotSpec,
        contract: ObservationContract,
        watchdog_hold_s: float | None = None,
        watchdog_stop_s: float | None = None,
    ) -> SafetyLimits:
        """Limits from the robot spec (box, action limits, gain bound, watchdog) and the policy's contract (bounds).

        The watchdog arguments override the spec's ``limits.watchdog_*_s``. The spec must describe the contract's
        control period and command scale (its delay is in control steps of that period, its gain relative to that
        scale): a mismatch raises ``ValueError`` naming both values.
        """
        problems = convention_mismatches(spec, contract)
        if problems:
            raise ValueError(
                "; ".join(problems) + ": the delay and the barrier's distances would be counted in other units; "
                "recalibrate at the policy's period and command convention, or use a package made for this robot"
            )
        if contract.goal_dim != len(spec.workspace_low):
            raise ValueError(
                f"contract {contract.name!r} has a {contract.goal_dim}-D position; the spec's box is "
                f"{len(spec.workspace_low)}-D"
            )
        symmetric_bound = min(contract.action_high, -contract.action_low)
        if symmetric_bound <= 0:
            raise ValueError(
                f"contract bounds [{contract.action_low}, {contract.action_high}] must contain the hold command 0"
            )
        return cls(
            workspace_low=spec.workspace_low,
            workspace_high=spec.workspace_high,
            max_action=min(spec.max_action, symmetric_bound),
            max_action_rate=spec.max_action_rate,
            barrier_fraction=spec.barrier_fraction,
            action_scale_m=contract.action_scale_m,
            actuator_gain_max=spec.actuator_gain_max,
            barrier_gain_margin=spec.barrier_gain_margin,
            watchdog_hold_s=spec.watchdog_hold_s if watchdog_hold_s is None else watchdog_hold_s,
            watchdog_stop_s=spec.watchdog_stop_s if watchdog_stop_s is None else watchdog_stop_s,
        )


class FilterResult(NamedTuple):
    """The filter's answer for one tick.

    :ivar action: the command to send (float64, the proposal's length); all zeros on a hold.
    :ivar reasons: the interventions applied, in filter order (empty: the proposal passed unchanged).
    :ivar stop: True when the loop must stop safely (send e-stop): the state is older than watchdog_stop_s.
    """

    action: np.ndarray
    reasons: tuple[str, ...]
    stop: bool


def hold_result(size: int, reason: str, stop: bool = False) -> FilterResult:
    """The hold command (zeros, ``size`` long) with one reason: what the loop sends when it cannot use the state or
    the policy this tick (``IMPLAUSIBLE_STATE``, ``ROBOT_RESTART``, ``POLICY_FAULT``) and the filter's own holds."""
    return FilterResult(np.zeros(size, dtype=np.float64), (reason,), stop)


def barrier_interval(
    position_low: float,
    position_high: float,
    pending: float,
    low: float,
    high: float,
    fraction: float,
    scale: float,
    gain: float = 1.0,
) -> tuple[float, float, bool]:
    """The command interval (units) on one axis that keeps the arm safe, and whether it is already outside.

    :param position_low: lower end of where the gripper may be now (metres).
    :param position_high: upper end (metres; equal to ``position_low`` for a trusted, noise-free state).
    :param pending: displacement still in flight at nominal gain (metres, signed).
    :param scale: metres per command unit per control step at nominal gain (``action_scale_m``).
    :param gain: upper bound of the actuator gain (metres moved per metre commanded).
    :returns: ``(lo, hi, outside)``. The worst-case ends are ``F_high = position_high + gain x max(pending, 0)`` and
        ``F_low = position_low + gain x min(pending, 0)``; inside, ``hi = fraction x (high - F_high) / (gain x scale)``
        and ``lo = -fraction x (F_low - low) / (gain x scale)``; past a face the bound toward it is 0 (no motion
        further out) and ``outside`` is True.
    """
    end_high = position_high + gain * max(pending, 0.0)
    end_low = position_low + gain * min(pending, 0.0)
    gap_high = high - end_high
    gap_low = end_low - low
    step = gain * scale
    hi = fraction * gap_high / step if gap_high > 0.0 else 0.0
    lo = -fraction * gap_low / step if gap_low > 0.0 else 0.0
    return lo, hi, gap_high < 0.0 or gap_low < 0.0


def commanded_position_ok(position_m: Sequence[float], limits: SafetyLimits) -> bool:
    """True when a (commanded) gripper position lies inside the workspace box, faces included."""
    return all(lo <= p <= hi for p, lo, hi in zip(position_m, limits.workspace_low, limits.workspace_high, strict=True))


def filter_action(
    position_m: Sequence[float] | np.ndarray,
    pending_displacement_m: Sequence[float] | np.ndarray,
    proposed: Sequence[float] | np.ndarray,
    previous_action: Sequence[float] | np.ndarray,
    state_age_s: float,
    limits: SafetyLimits,
    position_bounds_m: tuple[Sequence[float] | np.ndarray, Sequence[float] | np.ndarray] | None = None,
) -> FilterResult:
    """Make a proposed action safe to send (see the module docstring for the rules and their order).

    :param position_m: measured gripper position (metres, ``limits.position_dims`` values).
    :param pending_displacement_m: summed displacement (metres, at nominal gain) of the commands sent but not yet
        applied (``deploy.contract.in_flight_displacement_m``).
    :param proposed: the policy's action (command units); may hold NaN/inf/huge values.
    :param previous_action: the action sent at the previous tick (command units; zeros after a hold).
    :param state_age_s: seconds since the newest fresh state (new sequence number) arrived.
    :param limits: what to enforce.
    :param position_bounds_m: optional (low, high) per axis bounding where the gripper really is (metres); the
        barrier plans from the bound nearest each face. Default: exactly ``position_m``.
    """
    dims = limits.position_dims
    act = _floats(proposed, "proposed action")
    size = len(act)
    if size < dims:
        raise ValueError(f"the action has {size} components; the first {dims} must be the Cartesian displacement")
    if not state_age_s <= limits.watchdog_stop_s:  # also true for NaN
        return hold_result(size, STALE_STOP, stop=True)
    if state_age_s > limits.watchdog_hold_s:
        return hold_result(size, STALE_HOLD)
    pos = _floats(position_m, "position_m", dims)
    pending = _floats(pending_displacement_m, "pending_displacement_m", dims)
    if position_bounds_m is None:
        pos_low = pos_high = pos
    else:
        pos_low = _floats(position_bounds_m[0], "position_bounds_m[0]", dims)
        pos_high = _floats(position_bounds_m[1], "position_bounds_m[1]", dims)
    if not (_finite(pos) and _finite(pending) and _finite(pos_low) and _finite(pos_high)):
        return hold_result(size, NAN_STATE)
    if not _finite(act):
        return hold_result(size, NAN_ACTION)
    prev = _floats(previous_action, "previous_action", size)
    reasons: list[str] = []
    if not _finite(prev):
        prev = [0.0] * size
        reasons.append(NAN_PREVIOUS)

    bound = limits.max_action
    clipped = [min(max(a, -bound), bound) for a in act]
    if clipped != act:
        reasons.append(CLIP)

    rate = limits.max_action_rate
    limited = [min(max(a, p - rate), p + rate) for a, p in zip(clipped, prev, strict=True)]
    if limited != clipped:
        reasons.append(RATE_LIMIT)

    out = limited
    barrier_hit = outside = False
    low, high = limits.workspace_low, limits.workspace_high
    fraction, scale = limits.barrier_fraction, limits.action_scale_m
    gain = limits.actuator_gain_max * limits.barrier_gain_margin
    for axis in range(dims):
        lo, hi, out_here = barrier_interval(
            pos_low[axis], pos_high[axis], pending[axis], low[axis], high[axis], fraction, scale, gain
        )
        outside = outside or out_here
        a = out[axis]
        if a < lo or a > hi:
            out[axis] = min(max(a, lo), hi)
            barrier_hit = True
    if barrier_hit:
        reasons.append(WORKSPACE_BARRIER)
    if outside:
        reasons.append(OUTSIDE_WORKSPACE)
    return FilterResult(np.array(out, dtype=np.float64), tuple(reasons), False)


class InterventionCounter:
    """Counts the filter's interventions by reason over a run (and the ticks seen)."""

    def __init__(self) -> None:
        self.ticks = 0
        self.counts: dict[str, int] = dict.fromkeys(REASONS, 0)

    def add(self, reasons: Iterable[str]) -> None:
        """Count one tick's reasons (unknown reasons are counted too, under their own name)."""
        self.ticks += 1
        for reason in reasons:
            self.counts[reason] = self.counts.get(reason, 0) + 1

    def update(self, result: FilterResult) -> FilterResult:
        """Count ``result``'s reasons and return it unchanged (so it can wrap the call)."""
        self.add(result.reasons)
        return result

    @property
    def total(self) -> int:
        """Number of interventions of any kind."""
        return sum(self.counts.values())

    def as_dict(self) -> dict[str, int]:
        """Non-zero counts by reason, plus ``ticks``."""
        out = {reason: n for reason, n in self.counts.items() if n}
        out["ticks"] = self.ticks
        return out

    def reset(self) -> None:
        self.ticks = 0
        self.counts = dict.fromkeys(REASONS, 0)
