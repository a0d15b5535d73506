"""The calibration file: what was measured on a robot, read by the sim env and the safety filter.

yaml + stdlib only (the robot reads it). Schema version 1::

    schema_version: 1
    robot_id: sim_fetch              # which robot this describes
    date: "2026-11-30"               # when it was measured (ISO date)
    control_period_s: 0.04           # seconds per control step
    action_delay:
      steps: 2                       # measured command-to-motion delay, control steps (0..8)
      ms: 80.0                       # the same in milliseconds
      spread_steps: 0.0              # spread over repeated measurements, control steps
      range: [2, 2]                  # inclusive range the sim randomizes over (training)
    observation_noise_std_m: [0.0, 0.0, 0.0]   # gripper position noise at rest, per axis, metres
    workspace:                       # box the commanded gripper position must stay in, metres
      low: [1.05, 0.40, 0.40]
      high: [1.65, 1.10, 0.95]
    limits:
      max_action: 1.0                # |action| bound, command units
      max_action_rate: 0.5           # max change of a command between ticks, command units per step
      barrier_fraction: 0.5          # approach a workspace face by at most this share of the gap per step
      watchdog_hold_s: 0.1           # optional: state older than this -> hold (seconds)
      watchdog_stop_s: 0.5           # optional: state older than this -> safe stop / e-stop (seconds)
    measurements: {...}              # optional, written by the probe: per-run values, spreads, probe settings

A missing, malformed or out-of-range file raises ``CalibrationError`` naming the key and the allowed values.
"""

from __future__ import annotations

import datetime as _dt
import math
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

SCHEMA_VERSION = 1
MAX_DELAY_STEPS = 8
DEFAULT_SIM_CALIBRATION = Path(__file__).resolve().parent / "sim_fetch.yaml"


class CalibrationError(ValueError):
    """A calibration file that is missing, malformed or out of range."""


@dataclass(frozen=True)
class Calibration:
    """A validated calibration file. Units: seconds, control steps, metres."""

    robot_id: str
    date: str
    control_period_s: float
    delay_steps: int
    delay_ms: float
    delay_spread_steps: float
    delay_range: tuple[int, int]
    observation_noise_std_m: tuple[float, float, float]
    workspace_low: tuple[float, float, float]
    workspace_high: tuple[float, float, float]
    max_action: float = 1.0
    max_action_rate: float = 0.5
    barrier_fraction: float = 0.5
    watchdog_hold_s: float = 0.1
    watchdog_stop_s: float = 0.5
    measurements: Mapping[str, Any] | None = None
    schema_version: int = SCHEMA_VERSION

    def to_dict(self) -> dict[str, Any]:
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
            "observation_noise_std_m": list(self.observation_noise_std_m),
            "workspace": {"low": list(self.workspace_low), "high": list(self.workspace_high)},
            "limits": {
                "max_action": self.max_action,
                "max_action_rate": self.max_action_rate,
                "barrier_fraction": self.barrier_fraction,
                "watchdog_hold_s": self.watchdog_hold_s,
                "watchdog_stop_s": self.watchdog_stop_s,
            },
            **({"measurements": dict(self.measurements)} if self.measurements else {}),
        }


def _get(data: Mapping[str, Any], key: str, where: str) -> Any:
    if not isinstance(data, Mapping):
        raise CalibrationError(f"{where}: expected a mapping, got {type(data).__name__}")
    if key not in data:
        raise CalibrationError(f"{where}: missing key '{key}'")
    return data[key]


def _number(value: Any, key: str, low: float, high: float) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise CalibrationError(f"'{key}' must be a number, got {value!r}")
    value = float(value)
    if not math.isfinite(value) or not low <= value <= high:
        raise CalibrationError(f"'{key}' = {value} is out of range [{low}, {high}]")
    return value


def _integer(value: Any, key: str, low: int, high: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise CalibrationError(f"'{key}' must be an integer, got {value!r}")
    if not low <= value <= high:
        raise CalibrationError(f"'{key}' = {value} is out of range [{low}, {high}]")
    return value


def _vector(value: Any, key: str, n: int, low: float, high: float) -> tuple[float, ...]:
    if not isinstance(value, list | tuple) or len(value) != n:
        raise CalibrationError(f"'{key}' must be a list of {n} numbers, got {value!r}")
    return tuple(_number(v, f"{key}[{i}]", low, high) for i, v in enumerate(value))


KNOWN_KEYS: dict[str, tuple[str, ...]] = {
    "": (
        "schema_version",
        "robot_id",
        "date",
        "control_period_s",
        "action_delay",
        "observation_noise_std_m",
        "workspace",
        "limits",
        "measurements",
    ),
    "action_delay": ("steps", "ms", "spread_steps", "range"),
    "workspace": ("low", "high"),
    "limits": (
        "max_action",
        "max_action_rate",
        "barrier_fraction",
        "watchdog_hold_s",
        "watchdog_stop_s",
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
            raise CalibrationError(f"unknown key '{key}'; allowed keys: {', '.join(allowed)}")


def calibration_from_dict(data: Mapping[str, Any], source: str = "<dict>") -> Calibration:
    """Validate a parsed calibration mapping; errors name the key (``source`` prefixes them)."""
    try:
        if isinstance(data, Mapping):
            _check_known_keys(data)
        version = _get(data, "schema_version", source)
        if version != SCHEMA_VERSION:
            raise CalibrationError(f"'schema_version' = {version!r}; this build reads {SCHEMA_VERSION}")
        robot_id = _get(data, "robot_id", source)
        if not isinstance(robot_id, str) or not robot_id:
            raise CalibrationError(f"'robot_id' must be a non-empty string, got {robot_id!r}")
        date = str(_get(data, "date", source))
        period = _number(_get(data, "control_period_s", source), "control_period_s", 1e-4, 10.0)
        delay = _get(data, "action_delay", source)
        steps = _integer(_get(delay, "steps", "action_delay"), "action_delay.steps", 0, MAX_DELAY_STEPS)
        ms = _number(_get(delay, "ms", "action_delay"), "action_delay.ms", 0.0, 1e5)
        spread = _number(delay.get("spread_steps", 0.0), "action_delay.spread_steps", 0.0, MAX_DELAY_STEPS)
        rng = delay.get("range", [steps, steps])
        if not isinstance(rng, list | tuple) or len(rng) != 2:
            raise CalibrationError(f"'action_delay.range' must be [low, high] control steps, got {rng!r}")
        lo = _integer(rng[0], "action_delay.range[0]", 0, MAX_DELAY_STEPS)
        hi = _integer(rng[1], "action_delay.range[1]", 0, MAX_DELAY_STEPS)
        if lo > hi:
            raise CalibrationError(f"'action_delay.range' = [{lo}, {hi}]: low must not exceed high")
        noise = _vector(_get(data, "observation_noise_std_m", source), "observation_noise_std_m", 3, 0.0, 0.1)
        ws = _get(data, "workspace", source)
        low = _vector(_get(ws, "low", "workspace"), "workspace.low", 3, -10.0, 10.0)
        high = _vector(_get(ws, "high", "workspace"), "workspace.high", 3, -10.0, 10.0)
        for axis in range(3):
            if not low[axis] < high[axis]:
                raise CalibrationError(
                    f"'workspace.low[{axis}]' = {low[axis]} must be below 'workspace.high[{axis}]' = {high[axis]}"
                )
        limits = data.get("limits", {}) or {}
        if not isinstance(limits, Mapping):
            raise CalibrationError(f"'limits' must be a mapping, got {limits!r}")
        hold_s = _number(limits.get("watchdog_hold_s", 0.1), "limits.watchdog_hold_s", 1e-4, 60.0)
        stop_s = _number(limits.get("watchdog_stop_s", 0.5), "limits.watchdog_stop_s", 1e-4, 60.0)
        if stop_s < hold_s:
            raise CalibrationError(
                f"'limits.watchdog_stop_s' = {stop_s} must be >= 'limits.watchdog_hold_s' = {hold_s}"
            )
        measurements = data.get("measurements")
        if measurements is not None and not isinstance(measurements, Mapping):
            raise CalibrationError(f"'measurements' must be a mapping, got {type(measurements).__name__}")
        return Calibration(
            robot_id=robot_id,
            date=date,
            control_period_s=period,
            delay_steps=steps,
            delay_ms=ms,
            delay_spread_steps=spread,
            delay_range=(lo, hi),
            observation_noise_std_m=noise,  # type: ignore[arg-type]
            workspace_low=low,  # type: ignore[arg-type]
            workspace_high=high,  # type: ignore[arg-type]
            max_action=_number(limits.get("max_action", 1.0), "limits.max_action", 1e-3, 1.0),
            max_action_rate=_number(limits.get("max_action_rate", 0.5), "limits.max_action_rate", 1e-3, 2.0),
            barrier_fraction=_number(limits.get("barrier_fraction", 0.5), "limits.barrier_fraction", 1e-3, 1.0),
            watchdog_hold_s=hold_s,
            watchdog_stop_s=stop_s,
            measurements=measurements,
        )
    except CalibrationError as err:
        if str(err).startswith(source):
            raise
        raise CalibrationError(f"{source}: {err}") from None


def load_calibration(path: str | Path = DEFAULT_SIM_CALIBRATION) -> Calibration:
    """Read and validate a calibration file."""
    path = Path(path)
    if not path.is_file():
        raise CalibrationError(
            f"calibration file {path} does not exist; run `robot-grpo calibrate` or pass an existing file"
        )
    try:
        data = yaml.safe_load(path.read_text())
    except yaml.YAMLError as err:
        raise CalibrationError(f"{path}: not valid YAML: {err}") from None
    if not isinstance(data, Mapping):
        raise CalibrationError(f"{path}: expected a mapping at the top level, got {type(data).__name__}")
    return calibration_from_dict(data, source=str(path))


def save_calibration(calibration: Calibration, path: str | Path) -> Path:
    """Write a calibration file atomically (write to a temp file, then rename)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text(yaml.safe_dump(calibration.to_dict(), sort_keys=False))
    tmp.replace(path)
    return path


def today() -> str:
    return _dt.date.today().isoformat()
