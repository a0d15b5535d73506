"""The sections of a robot spec file, parsed: primitive validators and one parser per section (deploy.robot_spec
assembles them into a RobotSpec). Every error is a RobotSpecError that names the key and says how to fix it.

Robot side: stdlib and deploy.contract only (the runtime loads specs on the robot).
"""

from __future__ import annotations

import datetime as _dt
import math
import re
from collections.abc import Mapping
from typing import Any

from deploy.contract import MAX_DELAY_STEPS

AXES = 3
SAFE_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")
MAX_GAIN = 5.0  # metres moved per metre commanded: beyond this the file is wrong, not the robot
MIN_GAIN = 0.01
MAX_STATE_BOUND = 1e3  # largest magnitude a state_bounds limit may have (the field's units)
FIELD_NAME = re.compile(r"[a-z][a-z0-9_]*")  # a state field name, as the observation contracts spell them
MAX_HOME_TOLERANCE_M = 0.1  # a homing less repeatable than this is no anchor to check a HOMED state against
DELAY_MS_TOLERANCE_STEPS = 0.5  # 'action_delay.ms' may differ from steps x period by this many control periods


class RobotSpecError(ValueError):
    """A robot spec (calibration file) that is missing, malformed or out of range."""


def check_safe_name(name: Any, what: str) -> str:
    """``name`` if it is a safe file name (letters, digits, '.', '_', '-'; no path), else RobotSpecError."""
    if not isinstance(name, str) or not SAFE_NAME.fullmatch(name):
        raise RobotSpecError(
            f"{what} {name!r} is not a safe file name: use 1-64 letters, digits, '.', '_' or '-', starting with a "
            "letter or digit (it names files and folders)"
        )
    return name


def get_key(data: Mapping[str, Any], key: str, where: str) -> Any:
    if not isinstance(data, Mapping):
        raise RobotSpecError(f"{where}: expected a mapping, got {type(data).__name__}")
    if key not in data:
        raise RobotSpecError(f"{where}: missing key '{key}'")
    return data[key]


def number(value: Any, key: str, low: float, high: float) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise RobotSpecError(f"'{key}' must be a number, got {value!r}")
    value = float(value)
    if not math.isfinite(value) or not low <= value <= high:
        raise RobotSpecError(f"'{key}' = {value} is out of range [{low}, {high}]")
    return value


def integer(value: Any, key: str, low: int, high: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise RobotSpecError(f"'{key}' must be an integer, got {value!r}")
    if not low <= value <= high:
        raise RobotSpecError(f"'{key}' = {value} is out of range [{low}, {high}]")
    return value


def vector(value: Any, key: str, low: float, high: float) -> tuple[float, float, float]:
    if not isinstance(value, list | tuple) or len(value) != AXES:
        raise RobotSpecError(f"'{key}' must be a list of {AXES} numbers, got {value!r}")
    x, y, z = (number(v, f"{key}[{i}]", low, high) for i, v in enumerate(value))
    return x, y, z


def parse_delay(data: Mapping[str, Any], source: str) -> tuple[int, float, float, tuple[int, int]]:
    delay = get_key(data, "action_delay", source)
    steps = integer(get_key(delay, "steps", "action_delay"), "action_delay.steps", 0, MAX_DELAY_STEPS)
    ms = number(get_key(delay, "ms", "action_delay"), "action_delay.ms", 0.0, 1e5)
    spread = number(delay.get("spread_steps", 0.0), "action_delay.spread_steps", 0.0, MAX_DELAY_STEPS)
    rng = delay.get("range", [steps, steps])
    if not isinstance(rng, list | tuple) or len(rng) != 2:
        raise RobotSpecError(f"'action_delay.range' must be [low, high] control steps, got {rng!r}")
    lo = integer(rng[0], "action_delay.range[0]", 0, MAX_DELAY_STEPS)
    hi = integer(rng[1], "action_delay.range[1]", 0, MAX_DELAY_STEPS)
    if lo > hi:
        raise RobotSpecError(f"'action_delay.range' = [{lo}, {hi}]: low must not exceed high")
    if not lo <= steps <= hi:
        raise RobotSpecError(f"'action_delay.steps' = {steps} lies outside 'action_delay.range' = [{lo}, {hi}]")
    return steps, ms, spread, (lo, hi)


def check_delay_ms(steps: int, ms: float, period_s: float) -> None:
    """``ms`` must say the delay ``steps`` says: within half a control period of ``steps x period`` (the
    rounding of a continuous delay to whole steps; the calibration probe writes ``steps x period`` exactly)."""
    period_ms = period_s * 1000.0
    expected = steps * period_ms
    slack = DELAY_MS_TOLERANCE_STEPS * period_ms
    if abs(ms - expected) > slack * (1.0 + 1e-9):
        raise RobotSpecError(
            f"'action_delay.ms' = {ms:g} contradicts 'action_delay.steps' = {steps} at 'control_period_s' = "
            f"{period_s:g}: {steps} steps are {expected:g} ms, and ms must lie within half a control period of that "
            f"({expected - slack:g}..{expected + slack:g} ms); set ms to steps x control_period_s x 1000, or steps "
            f"to the delay the robot has (ms / 1000 / control_period_s = {ms / period_ms:.2f}), or re-run "
            "`robot-grpo calibrate`"
        )


def parse_date(value: Any) -> str:
    """The measurement date as ``YYYY-MM-DD``: a YAML date, or a string that is an ISO date."""
    if isinstance(value, _dt.date) and not isinstance(value, _dt.datetime):
        return value.isoformat()
    if isinstance(value, str):
        try:
            return _dt.date.fromisoformat(value).isoformat()
        except ValueError:
            pass
    raise RobotSpecError(
        f"'date' = {value!r} is not an ISO date: write the day the robot was measured as \"YYYY-MM-DD\" "
        f'(e.g. "{today()}"), without a time'
    )


def parse_gain(data: Mapping[str, Any], source: str) -> tuple[float, tuple, tuple, float]:
    gain = get_key(data, "actuator_gain", source)
    scale = number(get_key(gain, "command_scale_m", "actuator_gain"), "actuator_gain.command_scale_m", 1e-5, 1.0)
    per_axis = vector(get_key(gain, "per_axis", "actuator_gain"), "actuator_gain.per_axis", MIN_GAIN, MAX_GAIN)
    spread = vector(gain.get("spread", [0.0] * AXES), "actuator_gain.spread", 0.0, MAX_GAIN)
    upper = number(get_key(gain, "upper_bound", "actuator_gain"), "actuator_gain.upper_bound", MIN_GAIN, MAX_GAIN)
    if upper < max(per_axis):
        raise RobotSpecError(
            f"'actuator_gain.upper_bound' = {upper} is below the measured 'actuator_gain.per_axis' = {list(per_axis)}; "
            "the barrier must plan with a bound at least as large as every measured gain"
        )
    return scale, per_axis, spread, upper


def parse_home(
    data: Mapping[str, Any], low: tuple[float, ...], high: tuple[float, ...]
) -> tuple[tuple[float, float, float] | None, float]:
    """The optional ``home`` section: (position in metres, tolerance in metres), or (None, 0.0) without one."""
    home = data.get("home")
    if home is None:
        return None, 0.0
    if not isinstance(home, Mapping):
        raise RobotSpecError(f"'home' must be a mapping with 'position_m' and 'tolerance_m', got {home!r}")
    position = vector(get_key(home, "position_m", "home"), "home.position_m", -10.0, 10.0)
    tolerance = number(get_key(home, "tolerance_m", "home"), "home.tolerance_m", 0.0, MAX_HOME_TOLERANCE_M)
    if not tolerance > 0.0:
        raise RobotSpecError(
            "'home.tolerance_m' = 0: a check with no tolerance refuses every real homing; give the spread the "
            "calibration probe measured (it writes one), or drop the 'home' section to leave HOMED states unchecked"
        )
    outside = [axis for axis in range(AXES) if not low[axis] <= position[axis] <= high[axis]]
    if outside:
        axis = outside[0]
        raise RobotSpecError(
            f"'home.position_m[{axis}]' = {position[axis]} lies outside the workspace [{low[axis]}, {high[axis]}]: "
            "the loop could not command the arm from its home; re-run `robot-grpo calibrate` or fix the workspace"
        )
    return position, tolerance


def parse_state_bounds(bounds: Any) -> dict[str, tuple[float, float]] | None:
    """The optional ``state_bounds`` section: {state field name: (low, high)} in the field's units (None without
    one). Which names a robot's states have is the observation contract's: the state checker, and the calibration
    probe, refuse a name the contract lacks."""
    if bounds is None:
        return None
    if not isinstance(bounds, Mapping) or not bounds:
        raise RobotSpecError(
            f"'state_bounds' must map state field names to [low, high], e.g. {{gripper_state: [0.0, 0.05]}}; "
            f"got {bounds!r}"
        )
    out: dict[str, tuple[float, float]] = {}
    for name, bound in bounds.items():
        if not isinstance(name, str) or not FIELD_NAME.fullmatch(name):
            raise RobotSpecError(f"'state_bounds' key {name!r} is not a state field name (lower case, digits, '_')")
        key = f"state_bounds.{name}"
        if not isinstance(bound, list | tuple) or len(bound) != 2:
            raise RobotSpecError(f"'{key}' must be [low, high] in the field's units, got {bound!r}")
        low = number(bound[0], f"{key}[0]", -MAX_STATE_BOUND, MAX_STATE_BOUND)
        high = number(bound[1], f"{key}[1]", -MAX_STATE_BOUND, MAX_STATE_BOUND)
        if low > high:
            raise RobotSpecError(f"'{key}' = [{low}, {high}]: low must not exceed high")
        out[name] = (low, high)
    return out


def today() -> str:
    return _dt.date.today().isoformat()
