"""The robot spec: the one owner of what a robot is, loaded once from its calibration file into a frozen object.

yaml + stdlib only (the robot reads it). The sim env, the simulated robot, the exporter, the runtime, the gate and
the calibration probe all receive a ``RobotSpec``; none re-derives a field (the delay is not "the history
length", the gain is not "the contract's scale"). The file form, schema version 2::

    schema_version: 2
    robot_id: sim_fetch                # which robot (a safe file name: letters, digits, '.', '_', '-')
    date: "2026-12-01"                 # when it was measured (ISO date)
    control_period_s: 0.04             # seconds per control step
    action_delay:
      steps: 2                         # measured command-to-motion delay, control steps (0..MAX_DELAY_STEPS)
      ms: 80.0                         # the same in milliseconds (within half a control period of steps x period)
      spread_steps: 0.0                # spread over repeated measurements, control steps
      range: [2, 2]                    # inclusive range the sim randomizes over (training); contains steps
    actuator_gain:                     # metres moved per metre commanded (command units x command_scale_m)
      command_scale_m: 0.05            # the robot's command convention: metres per unit command per control step
      per_axis: [0.67, 0.67, 0.67]     # measured long-run response per axis (x, y, z)
      spread: [0.0, 0.0, 0.0]          # std over the probe's repeated moves, per axis
      upper_bound: 0.75                # what the workspace barrier plans with (>= every per-axis gain)
    observation_noise_std_m: [0.0, 0.0, 0.0]   # gripper position noise at rest, per axis, metres
    plausible_speed_m_s: 1.5           # no real gripper motion is faster (metres per second)
    homing_s: 0.004                    # optional: HOME sent -> HOMED state, seconds, as the probe measured it
                                       # (the arm's homing motion plus a round trip; 0 = not measured)
    home:                              # optional: where a HOME leaves the gripper, as the probe measured it
      position_m: [1.342, 0.749, 0.535]   # metres (mean over the probe's homings); inside the workspace
      tolerance_m: 0.005               # a HOMED state further (Euclidean) than this, plus the noise, is a glitch
    state_bounds:                      # optional: the range of other state fields, in their units (a joint's
      gripper_state: [0.0, 0.05]       # limits from the robot's model); unbounded fields: the envelope's diagonal
    workspace:                         # box the gripper must stay in, metres
      low: [1.05, 0.40, 0.40]
      high: [1.65, 1.10, 0.95]
    limits:
      max_action: 1.0                  # |action| bound, command units
      max_action_rate: 0.5             # max change of a command between ticks, command units per step
      barrier_fraction: 0.5            # approach a workspace face by at most this share of the gap per step
      watchdog_hold_s: 0.1             # optional: state older than this -> hold (seconds)
      watchdog_stop_s: 0.5             # optional: state older than this -> safe stop / e-stop (seconds)
      envelope_margin_m: 0.1           # optional: a reported position further than this outside the workspace
                                       # is not physically plausible (metres)
    measurements: {...}                # optional, written by the probe: per-run values, spreads, probe settings

A missing, malformed, misspelt or out-of-range key raises ``RobotSpecError`` naming the file, the key and the
allowed values. Version 1 files (no actuator gain, no plausible speed) are refused with the fix.
"""

from __future__ import annotations

import datetime as _dt
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from deploy.contract import MAX_DELAY_STEPS

SCHEMA_VERSION = 2
DEFAULT_SIM_SPEC = Path(__file__).resolve().parent.parent / "calibration" / "sim_fetch.yaml"
AXES = 3
SAFE_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")
MAX_GAIN = 5.0  # metres moved per metre commanded: beyond this the file is wrong, not the robot
MIN_GAIN = 0.01
DEFAULT_WATCHDOG_HOLD_S = 0.1
DEFAULT_WATCHDOG_STOP_S = 0.5
DEFAULT_ENVELOPE_MARGIN_M = 0.1
DEFAULT_HOMING_S = 0.0  # not measured: the loop sizes its wait for HOMED by the round trips it measures
MAX_HOMING_S = 600.0
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


@dataclass(frozen=True)
class RobotSpec:
    """A validated robot spec. Units: seconds, control steps, metres; gains in metres per metre commanded.

    Build it with :func:`load_robot_spec` or :func:`robot_spec_from_dict` (they validate); the module docstring
    documents every field.
    """

    robot_id: str
    date: str
    control_period_s: float
    delay_steps: int
    delay_ms: float
    delay_spread_steps: float
    delay_range: tuple[int, int]
    command_scale_m: float
    actuator_gain: tuple[float, float, float]
    actuator_gain_spread: tuple[float, float, float]
    actuator_gain_max: float
    observation_noise_std_m: tuple[float, float, float]
    plausible_speed_m_s: float
    workspace_low: tuple[float, float, float]
    workspace_high: tuple[float, float, float]
    max_action: float = 1.0
    max_action_rate: float = 0.5
    barrier_fraction: float = 0.5
    watchdog_hold_s: float = DEFAULT_WATCHDOG_HOLD_S
    watchdog_stop_s: float = DEFAULT_WATCHDOG_STOP_S
    envelope_margin_m: float = DEFAULT_ENVELOPE_MARGIN_M
    homing_s: float = DEFAULT_HOMING_S
    home_position_m: tuple[float, float, float] | None = None
    home_tolerance_m: float = 0.0
    state_bounds: Mapping[str, tuple[float, float]] | None = None
    measurements: Mapping[str, Any] | None = None
    schema_version: int = SCHEMA_VERSION

    @property
    def max_step_m(self) -> float:
        """Largest displacement (metres) one control step can cause: max_action x command scale x gain bound."""
        return self.max_action * self.command_scale_m * self.actuator_gain_max

    def _home_dict(self) -> dict[str, Any]:
        if self.home_position_m is None:
            return {}
        return {"home": {"position_m": list(self.home_position_m), "tolerance_m": self.home_tolerance_m}}

    def _state_bounds_dict(self) -> dict[str, Any]:
        if not self.state_bounds:
            return {}
        return {"state_bounds": {name: list(bound) for name, bound in self.state_bounds.items()}}

    def to_dict(self) -> dict[str, Any]:
        """The file form (see the module docstring)."""
        return {
            "schema_version": self.schema_version,
            "robot_id": self.robot_id,
            "date": self.date,
            "control_period_s": self.control_period_s,
            "action_delay": {
                "steps": self.delay_steps,
                "ms": self.delay_ms,
                "spread_steps": self.delay_spread_steps,
                "range": list(self.delay_range),
            },
            "actuator_gain": {
                "command_scale_m": self.command_scale_m,
                "per_axis": list(self.actuator_gain),
                "spread": list(self.actuator_gain_spread),
                "upper_bound": self.actuator_gain_max,
            },
            "observation_noise_std_m": list(self.observation_noise_std_m),
            "plausible_speed_m_s": self.plausible_speed_m_s,
            "homing_s": self.homing_s,
            **self._home_dict(),
            **self._state_bounds_dict(),
            "workspace": {"low": list(self.workspace_low), "high": list(self.workspace_high)},
            "limits": {
                "max_action": self.max_action,
                "max_action_rate": self.max_action_rate,
                "barrier_fraction": self.barrier_fraction,
                "watchdog_hold_s": self.watchdog_hold_s,
                "watchdog_stop_s": self.watchdog_stop_s,
                "envelope_margin_m": self.envelope_margin_m,
            },
            **({"measurements": dict(self.measurements)} if self.measurements else {}),
        }


# Validation helpers ------------------------------------------------------------------------------------------
def _get(data: Mapping[str, Any], key: str, where: str) -> Any:
    if not isinstance(data, Mapping):
        raise RobotSpecError(f"{where}: expected a mapping, got {type(data).__name__}")
    if key not in data:
        raise RobotSpecError(f"{where}: missing key '{key}'")
    return data[key]


def _number(value: Any, key: str, low: float, high: float) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise RobotSpecError(f"'{key}' must be a number, got {value!r}")
    value = float(value)
    if not math.isfinite(value) or not low <= value <= high:
        raise RobotSpecError(f"'{key}' = {value} is out of range [{low}, {high}]")
    return value


def _integer(value: Any, key: str, low: int, high: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise RobotSpecError(f"'{key}' must be an integer, got {value!r}")
    if not low <= value <= high:
        raise RobotSpecError(f"'{key}' = {value} is out of range [{low}, {high}]")
    return value


def _vector(value: Any, key: str, low: float, high: float) -> tuple[float, float, float]:
    if not isinstance(value, list | tuple) or len(value) != AXES:
        raise RobotSpecError(f"'{key}' must be a list of {AXES} numbers, got {value!r}")
    x, y, z = (_number(v, f"{key}[{i}]", low, high) for i, v in enumerate(value))
    return x, y, z


KNOWN_KEYS: dict[str, tuple[str, ...]] = {
    "": (
        "schema_version",
        "robot_id",
        "date",
        "control_period_s",
        "action_delay",
        "actuator_gain",
        "observation_noise_std_m",
        "plausible_speed_m_s",
        "homing_s",
        "home",
        "state_bounds",
        "workspace",
        "limits",
        "measurements",
    ),
    "action_delay": ("steps", "ms", "spread_steps", "range"),
    "actuator_gain": ("command_scale_m", "per_axis", "spread", "upper_bound"),
    "workspace": ("low", "high"),
    "home": ("position_m", "tolerance_m"),
    "limits": (
        "max_action",
        "max_action_rate",
        "barrier_fraction",
        "watchdog_hold_s",
        "watchdog_stop_s",
        "envelope_margin_m",
    ),
}


def _check_known_keys(data: Mapping[str, Any]) -> None:
    """Refuse unknown keys: a misspelt limit (``max_acton``) must not silently fall back to its default."""
    for section, allowed in KNOWN_KEYS.items():
        node = data if not section else data.get(section)
        if not isinstance(node, Mapping):
            continue
        unknown = sorted(set(node) - set(allowed))
        if unknown:
            key = f"{section}.{unknown[0]}" if section else unknown[0]
            raise RobotSpecError(f"unknown key '{key}'; allowed keys: {', '.join(allowed)}")


def _delay(data: Mapping[str, Any], source: str) -> tuple[int, float, float, tuple[int, int]]:
    delay = _get(data, "action_delay", source)
    steps = _integer(_get(delay, "steps", "action_delay"), "action_delay.steps", 0, MAX_DELAY_STEPS)
    ms = _number(_get(delay, "ms", "action_delay"), "action_delay.ms", 0.0, 1e5)
    spread = _number(delay.get("spread_steps", 0.0), "action_delay.spread_steps", 0.0, MAX_DELAY_STEPS)
    rng = delay.get("range", [steps, steps])
    if not isinstance(rng, list | tuple) or len(rng) != 2:
        raise RobotSpecError(f"'action_delay.range' must be [low, high] control steps, got {rng!r}")
    lo = _integer(rng[0], "action_delay.range[0]", 0, MAX_DELAY_STEPS)
    hi = _integer(rng[1], "action_delay.range[1]", 0, MAX_DELAY_STEPS)
    if lo > hi:
        raise RobotSpecError(f"'action_delay.range' = [{lo}, {hi}]: low must not exceed high")
    if not lo <= steps <= hi:
        raise RobotSpecError(f"'action_delay.steps' = {steps} lies outside 'action_delay.range' = [{lo}, {hi}]")
    return steps, ms, spread, (lo, hi)


def _check_delay_ms(steps: int, ms: float, period_s: float) -> None:
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


def _date(value: Any) -> str:
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


def _gain(data: Mapping[str, Any], source: str) -> tuple[float, tuple, tuple, float]:
    gain = _get(data, "actuator_gain", source)
    scale = _number(_get(gain, "command_scale_m", "actuator_gain"), "actuator_gain.command_scale_m", 1e-5, 1.0)
    per_axis = _vector(_get(gain, "per_axis", "actuator_gain"), "actuator_gain.per_axis", MIN_GAIN, MAX_GAIN)
    spread = _vector(gain.get("spread", [0.0] * AXES), "actuator_gain.spread", 0.0, MAX_GAIN)
    upper = _number(_get(gain, "upper_bound", "actuator_gain"), "actuator_gain.upper_bound", MIN_GAIN, MAX_GAIN)
    if upper < max(per_axis):
        raise RobotSpecError(
            f"'actuator_gain.upper_bound' = {upper} is below the measured 'actuator_gain.per_axis' = {list(per_axis)}; "
            "the barrier must plan with a bound at least as large as every measured gain"
        )
    return scale, per_axis, spread, upper


def _home(
    data: Mapping[str, Any], low: tuple[float, ...], high: tuple[float, ...]
) -> tuple[tuple[float, float, float] | None, float]:
    """The optional ``home`` section: (position in metres, tolerance in metres), or (None, 0.0) without one."""
    home = data.get("home")
    if home is None:
        return None, 0.0
    if not isinstance(home, Mapping):
        raise RobotSpecError(f"'home' must be a mapping with 'position_m' and 'tolerance_m', got {home!r}")
    position = _vector(_get(home, "position_m", "home"), "home.position_m", -10.0, 10.0)
    tolerance = _number(_get(home, "tolerance_m", "home"), "home.tolerance_m", 0.0, MAX_HOME_TOLERANCE_M)
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
        low = _number(bound[0], f"{key}[0]", -MAX_STATE_BOUND, MAX_STATE_BOUND)
        high = _number(bound[1], f"{key}[1]", -MAX_STATE_BOUND, MAX_STATE_BOUND)
        if low > high:
            raise RobotSpecError(f"'{key}' = [{low}, {high}]: low must not exceed high")
        out[name] = (low, high)
    return out


def robot_spec_from_dict(data: Mapping[str, Any], source: str = "<dict>") -> RobotSpec:
    """Validate a parsed spec mapping; errors name the key (``source`` prefixes them)."""
    try:
        if not isinstance(data, Mapping):
            raise RobotSpecError(f"expected a mapping at the top level, got {type(data).__name__}")
        version = _get(data, "schema_version", source)
        if version == 1:
            raise RobotSpecError(
                "'schema_version' = 1: this file has no actuator gain and no plausible speed. Re-run "
                "`robot-grpo calibrate` (it measures them), or add the 'actuator_gain' and 'plausible_speed_m_s' "
                f"keys as in {DEFAULT_SIM_SPEC.name} and set schema_version: {SCHEMA_VERSION}"
            )
        if version != SCHEMA_VERSION:
            raise RobotSpecError(f"'schema_version' = {version!r}; this build reads {SCHEMA_VERSION}")
        _check_known_keys(data)
        robot_id = check_safe_name(_get(data, "robot_id", source), "'robot_id'")
        date = _date(_get(data, "date", source))
        period = _number(_get(data, "control_period_s", source), "control_period_s", 1e-4, 10.0)
        steps, ms, spread, delay_range = _delay(data, source)
        _check_delay_ms(steps, ms, period)
        scale, gain, gain_spread, gain_max = _gain(data, source)
        noise = _vector(_get(data, "observation_noise_std_m", source), "observation_noise_std_m", 0.0, 0.1)
        speed = _number(_get(data, "plausible_speed_m_s", source), "plausible_speed_m_s", 1e-3, 100.0)
        ws = _get(data, "workspace", source)
        low = _vector(_get(ws, "low", "workspace"), "workspace.low", -10.0, 10.0)
        high = _vector(_get(ws, "high", "workspace"), "workspace.high", -10.0, 10.0)
        for axis in range(AXES):
            if not low[axis] < high[axis]:
                raise RobotSpecError(
                    f"'workspace.low[{axis}]' = {low[axis]} must be below 'workspace.high[{axis}]' = {high[axis]}"
                )
        home_position, home_tolerance = _home(data, low, high)
        limits = data.get("limits", {}) or {}
        if not isinstance(limits, Mapping):
            raise RobotSpecError(f"'limits' must be a mapping, got {limits!r}")
        hold_s = _number(limits.get("watchdog_hold_s", DEFAULT_WATCHDOG_HOLD_S), "limits.watchdog_hold_s", 1e-4, 60.0)
        stop_s = _number(limits.get("watchdog_stop_s", DEFAULT_WATCHDOG_STOP_S), "limits.watchdog_stop_s", 1e-4, 60.0)
        if stop_s < hold_s:
            raise RobotSpecError(f"'limits.watchdog_stop_s' = {stop_s} must be >= 'limits.watchdog_hold_s' = {hold_s}")
        max_action = _number(limits.get("max_action", 1.0), "limits.max_action", 1e-3, 1.0)
        fastest = max_action * scale * gain_max / period
        if speed < fastest:
            raise RobotSpecError(
                f"'plausible_speed_m_s' = {speed} is below what the robot itself can do: max_action {max_action} x "
                f"command_scale_m {scale} x gain upper_bound {gain_max} / control_period_s {period} = {fastest:.3g} "
                "m/s; raise it (the calibration probe writes a measured value)"
            )
        measurements = data.get("measurements")
        if measurements is not None and not isinstance(measurements, Mapping):
            raise RobotSpecError(f"'measurements' must be a mapping, got {type(measurements).__name__}")
        return RobotSpec(
            robot_id=robot_id,
            date=date,
            control_period_s=period,
            delay_steps=steps,
            delay_ms=ms,
            delay_spread_steps=spread,
            delay_range=delay_range,
            command_scale_m=scale,
            actuator_gain=gain,
            actuator_gain_spread=gain_spread,
            actuator_gain_max=gain_max,
            observation_noise_std_m=noise,
            plausible_speed_m_s=speed,
            workspace_low=low,
            workspace_high=high,
            max_action=max_action,
            max_action_rate=_number(limits.get("max_action_rate", 0.5), "limits.max_action_rate", 1e-3, 2.0),
            barrier_fraction=_number(limits.get("barrier_fraction", 0.5), "limits.barrier_fraction", 1e-3, 1.0),
            watchdog_hold_s=hold_s,
            watchdog_stop_s=stop_s,
            envelope_margin_m=_number(
                limits.get("envelope_margin_m", DEFAULT_ENVELOPE_MARGIN_M), "limits.envelope_margin_m", 0.0, 10.0
            ),
            homing_s=_number(data.get("homing_s", DEFAULT_HOMING_S), "homing_s", 0.0, MAX_HOMING_S),
            home_position_m=home_position,
            home_tolerance_m=home_tolerance,
            state_bounds=parse_state_bounds(data.get("state_bounds")),
            measurements=measurements,
        )
    except RobotSpecError as err:
        if str(err).startswith(source):
            raise
        raise RobotSpecError(f"{source}: {err}") from None


def load_robot_spec(path: str | Path = DEFAULT_SIM_SPEC) -> RobotSpec:
    """Read and validate a robot spec file."""
    path = Path(path)
    if not path.is_file():
        raise RobotSpecError(
            f"robot spec file {path} does not exist; run `robot-grpo calibrate` to measure the robot, or pass an "
            "existing calibration file"
        )
    try:
        data = yaml.safe_load(path.read_text())
    except yaml.YAMLError as err:
        raise RobotSpecError(f"{path}: not valid YAML: {err}") from None
    if not isinstance(data, Mapping):
        raise RobotSpecError(f"{path}: expected a mapping at the top level, got {type(data).__name__}")
    return robot_spec_from_dict(data, source=str(path))


def as_robot_spec(spec: RobotSpec | str | Path | None) -> RobotSpec:
    """A spec object from a spec, a file path, or None (the simulated robot's ``calibration/sim_fetch.yaml``)."""
    if isinstance(spec, RobotSpec):
        return spec
    return load_robot_spec(DEFAULT_SIM_SPEC if spec is None else spec)


def save_robot_spec(spec: RobotSpec, path: str | Path) -> Path:
    """Write a spec file atomically (write to a temp file, then rename)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text(yaml.safe_dump(spec.to_dict(), sort_keys=False))
    tmp.replace(path)
    return path


def today() -> str:
    return _dt.date.today().isoformat()
