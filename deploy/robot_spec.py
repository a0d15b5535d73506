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
      barrier_gain_margin: 2.0         # optional: the barrier plans with this many times the gain bound, so a
                                       # motor up to that much faster than calibrated stays inside until caught
      watchdog_hold_s: 0.1             # optional: state older than this -> hold (seconds)
      watchdog_stop_s: 0.5             # optional: state older than this -> safe stop / e-stop (seconds)
      envelope_margin_m: 0.1           # optional: a reported position further than this outside the workspace
                                       # is not physically plausible (metres)
    block_tracker: {...}               # optional: the robot reports a block's position (push; see
                                       # deploy.block_tracker_spec): tracker noise (m), rate (Hz), table box
    measurements: {...}                # optional, written by the probe: per-run values, spreads, probe settings

A missing, malformed, misspelt or out-of-range key raises ``RobotSpecError`` naming the file, the key and the
allowed values. Version 1 files (no actuator gain, no plausible speed) are refused with the fix.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from deploy.block_tracker_spec import BlockTrackerSpec, parse_block_tracker
from deploy.robot_spec_sections import (
    AXES,
    RobotSpecError,
    check_delay_ms,
    check_safe_name,
    get_key,
    number,
    parse_date,
    parse_delay,
    parse_gain,
    parse_home,
    parse_state_bounds,
    vector,
)
from deploy.shipped import INSTALL_ROOT

SCHEMA_VERSION = 2
DEFAULT_SIM_SPEC = INSTALL_ROOT / "calibration" / "sim_fetch.yaml"  # shipped: found wherever the command runs
DEFAULT_WATCHDOG_HOLD_S = 0.1
DEFAULT_WATCHDOG_STOP_S = 0.5
DEFAULT_ENVELOPE_MARGIN_M = 0.1
DEFAULT_BARRIER_GAIN_MARGIN = 2.0  # the barrier plans with 2x the gain bound (see docs/safety.md)
MAX_BARRIER_GAIN_MARGIN = 10.0
DEFAULT_HOMING_S = 0.0  # not measured: the loop sizes its wait for HOMED by the round trips it measures
MAX_HOMING_S = 600.0


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
    barrier_gain_margin: float = DEFAULT_BARRIER_GAIN_MARGIN
    watchdog_hold_s: float = DEFAULT_WATCHDOG_HOLD_S
    watchdog_stop_s: float = DEFAULT_WATCHDOG_STOP_S
    envelope_margin_m: float = DEFAULT_ENVELOPE_MARGIN_M
    homing_s: float = DEFAULT_HOMING_S
    home_position_m: tuple[float, float, float] | None = None
    home_tolerance_m: float = 0.0
    state_bounds: Mapping[str, tuple[float, float]] | None = None
    block_tracker: BlockTrackerSpec | None = None
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
            **({"block_tracker": self.block_tracker.to_dict()} if self.block_tracker else {}),
            "workspace": {"low": list(self.workspace_low), "high": list(self.workspace_high)},
            "limits": {
                "max_action": self.max_action,
                "max_action_rate": self.max_action_rate,
                "barrier_fraction": self.barrier_fraction,
                "barrier_gain_margin": self.barrier_gain_margin,
                "watchdog_hold_s": self.watchdog_hold_s,
                "watchdog_stop_s": self.watchdog_stop_s,
                "envelope_margin_m": self.envelope_margin_m,
            },
            **({"measurements": dict(self.measurements)} if self.measurements else {}),
        }


# Validation helpers ------------------------------------------------------------------------------------------
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
        "block_tracker",
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
        "barrier_gain_margin",
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


def robot_spec_from_dict(data: Mapping[str, Any], source: str = "<dict>") -> RobotSpec:
    """Validate a parsed spec mapping; errors name the key (``source`` prefixes them)."""
    try:
        if not isinstance(data, Mapping):
            raise RobotSpecError(f"expected a mapping at the top level, got {type(data).__name__}")
        version = get_key(data, "schema_version", source)
        if version == 1:
            raise RobotSpecError(
                "'schema_version' = 1: this file has no actuator gain and no plausible speed. Re-run "
                "`robot-grpo calibrate` (it measures them), or add the 'actuator_gain' and 'plausible_speed_m_s' "
                f"keys as in {DEFAULT_SIM_SPEC.name} and set schema_version: {SCHEMA_VERSION}"
            )
        if version != SCHEMA_VERSION:
            raise RobotSpecError(f"'schema_version' = {version!r}; this build reads {SCHEMA_VERSION}")
        _check_known_keys(data)
        robot_id = check_safe_name(get_key(data, "robot_id", source), "'robot_id'")
        date = parse_date(get_key(data, "date", source))
        period = number(get_key(data, "control_period_s", source), "control_period_s", 1e-4, 10.0)
        steps, ms, spread, delay_range = parse_delay(data, source)
        check_delay_ms(steps, ms, period)
        scale, gain, gain_spread, gain_max = parse_gain(data, source)
        noise = vector(get_key(data, "observation_noise_std_m", source), "observation_noise_std_m", 0.0, 0.1)
        speed = number(get_key(data, "plausible_speed_m_s", source), "plausible_speed_m_s", 1e-3, 100.0)
        ws = get_key(data, "workspace", source)
        low = vector(get_key(ws, "low", "workspace"), "workspace.low", -10.0, 10.0)
        high = vector(get_key(ws, "high", "workspace"), "workspace.high", -10.0, 10.0)
        for axis in range(AXES):
            if not low[axis] < high[axis]:
                raise RobotSpecError(
                    f"'workspace.low[{axis}]' = {low[axis]} must be below 'workspace.high[{axis}]' = {high[axis]}"
                )
        home_position, home_tolerance = parse_home(data, low, high)
        limits = data.get("limits", {}) or {}
        if not isinstance(limits, Mapping):
            raise RobotSpecError(f"'limits' must be a mapping, got {limits!r}")
        hold_s = number(limits.get("watchdog_hold_s", DEFAULT_WATCHDOG_HOLD_S), "limits.watchdog_hold_s", 1e-4, 60.0)
        stop_s = number(limits.get("watchdog_stop_s", DEFAULT_WATCHDOG_STOP_S), "limits.watchdog_stop_s", 1e-4, 60.0)
        if stop_s < hold_s:
            raise RobotSpecError(f"'limits.watchdog_stop_s' = {stop_s} must be >= 'limits.watchdog_hold_s' = {hold_s}")
        max_action = number(limits.get("max_action", 1.0), "limits.max_action", 1e-3, 1.0)
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
            max_action_rate=number(limits.get("max_action_rate", 0.5), "limits.max_action_rate", 1e-3, 2.0),
            barrier_fraction=number(limits.get("barrier_fraction", 0.5), "limits.barrier_fraction", 1e-3, 1.0),
            barrier_gain_margin=number(
                limits.get("barrier_gain_margin", DEFAULT_BARRIER_GAIN_MARGIN),
                "limits.barrier_gain_margin",
                1.0,
                MAX_BARRIER_GAIN_MARGIN,
            ),
            watchdog_hold_s=hold_s,
            watchdog_stop_s=stop_s,
            envelope_margin_m=number(
                limits.get("envelope_margin_m", DEFAULT_ENVELOPE_MARGIN_M), "limits.envelope_margin_m", 0.0, 10.0
            ),
            homing_s=number(data.get("homing_s", DEFAULT_HOMING_S), "homing_s", 0.0, MAX_HOMING_S),
            home_position_m=home_position,
            home_tolerance_m=home_tolerance,
            state_bounds=parse_state_bounds(data.get("state_bounds")),
            block_tracker=parse_block_tracker(data.get("block_tracker"), period),
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
