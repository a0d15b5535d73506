"""The robot spec file: a valid file round-trips; a missing, malformed, misspelt or out-of-range one names the key."""

from __future__ import annotations

import copy
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
import yaml

from deploy.robot_spec import (
    DEFAULT_SIM_SPEC,
    SCHEMA_VERSION,
    RobotSpecError,
    load_robot_spec,
    robot_spec_from_dict,
    save_robot_spec,
)

DELETE = object()


def valid() -> dict[str, Any]:
    return yaml.safe_load(DEFAULT_SIM_SPEC.read_text())


def write(tmp_path: Path, data: Any) -> Path:
    path = tmp_path / "robot.yaml"
    path.write_text(yaml.safe_dump(data) if not isinstance(data, str) else data)
    return path


def edit(path: tuple[str, ...], value: Any) -> dict[str, Any]:
    data = copy.deepcopy(valid())
    node = data
    for key in path[:-1]:
        node = node[key]
    if value is DELETE:
        del node[path[-1]]
    else:
        node[path[-1]] = value
    return data


def test_shipped_sim_spec_loads() -> None:
    spec = load_robot_spec()
    assert spec.schema_version == SCHEMA_VERSION
    assert spec.robot_id == "sim_fetch"
    assert spec.delay_steps == 2 and spec.delay_range == (2, 2)
    assert spec.control_period_s == pytest.approx(0.04)
    assert spec.delay_ms == pytest.approx(spec.delay_steps * spec.control_period_s * 1000)
    assert all(lo < hi for lo, hi in zip(spec.workspace_low, spec.workspace_high, strict=True))
    assert spec.actuator_gain_max >= max(spec.actuator_gain)
    # the fastest step the gain bound allows: 1 unit x 0.05 m x bound, per 0.04 s; the plausible speed is above it
    assert spec.plausible_speed_m_s >= spec.max_step_m / spec.control_period_s


def test_save_load_round_trip(tmp_path: Path) -> None:
    spec = replace(
        load_robot_spec(),
        watchdog_hold_s=0.08,
        watchdog_stop_s=0.4,
        measurements={"delay_runs_steps": [2, 2, 2], "reach_limited_by": {"x_low": "safe_box"}},
    )
    path = save_robot_spec(spec, tmp_path / "sub" / "copy.yaml")
    assert load_robot_spec(path) == spec
    assert not list(tmp_path.glob("**/*.tmp"))


def test_missing_file_says_how_to_fix(tmp_path: Path) -> None:
    with pytest.raises(RobotSpecError, match="does not exist.*calibrate"):
        load_robot_spec(tmp_path / "nope.yaml")


@pytest.mark.parametrize(
    ("text", "match"),
    [
        ("action_delay: [1, 2\n", "not valid YAML"),
        ("- 1\n- 2\n", "expected a mapping at the top level"),
        ("", "expected a mapping at the top level"),
    ],
)
def test_malformed_file(tmp_path: Path, text: str, match: str) -> None:
    with pytest.raises(RobotSpecError, match=match):
        load_robot_spec(write(tmp_path, text))


def test_version_1_file_is_refused_with_the_fix() -> None:
    data = valid()
    data["schema_version"] = 1
    with pytest.raises(RobotSpecError, match=r"schema_version' = 1.*no actuator gain.*robot-grpo calibrate"):
        robot_spec_from_dict(data)


@pytest.mark.parametrize(
    ("path", "value", "match"),
    [
        (("schema_version",), 3, "'schema_version' = 3"),
        (("robot_id",), "", "'robot_id' '' is not a safe file name"),
        (("robot_id",), "../../x", r"'robot_id' '../../x' is not a safe file name"),
        (("robot_id",), "arm/1", "is not a safe file name"),
        (("control_period_s",), DELETE, "missing key 'control_period_s'"),
        (("control_period_s",), -0.04, r"'control_period_s' = -0.04 is out of range"),
        (("action_delay",), DELETE, "missing key 'action_delay'"),
        (("action_delay",), 2, "action_delay: expected a mapping"),
        (("action_delay", "steps"), DELETE, "action_delay: missing key 'steps'"),
        (("action_delay", "steps"), 9, r"'action_delay.steps' = 9 is out of range \[0, 8\]"),
        (("action_delay", "steps"), 2.5, "'action_delay.steps' must be an integer"),
        (("action_delay", "steps"), True, "'action_delay.steps' must be an integer"),
        (("action_delay", "steps"), 3, r"'action_delay.steps' = 3 lies outside 'action_delay.range' = \[2, 2\]"),
        (("action_delay", "range"), [3, 1], "'action_delay.range' = \\[3, 1\\]: low must not exceed high"),
        (("action_delay", "range"), [1, 9], r"'action_delay.range\[1\]' = 9 is out of range"),
        (("action_delay", "range"), 2, r"'action_delay.range' must be \[low, high\]"),
        (("actuator_gain",), DELETE, "missing key 'actuator_gain'"),
        (("actuator_gain", "per_axis"), [0.6, 0.6], r"'actuator_gain.per_axis' must be a list of 3 numbers"),
        (("actuator_gain", "per_axis"), [0.6, -0.6, 0.6], r"'actuator_gain.per_axis\[1\]' = -0.6 is out of range"),
        (("actuator_gain", "upper_bound"), 0.5, r"'actuator_gain.upper_bound' = 0.5 is below the measured"),
        (("actuator_gain", "command_scale_m"), DELETE, "actuator_gain: missing key 'command_scale_m'"),
        (("plausible_speed_m_s",), 0.5, r"'plausible_speed_m_s' = 0.5 is below what the robot itself can do"),
        (("plausible_speed_m_s",), DELETE, "missing key 'plausible_speed_m_s'"),
        (("observation_noise_std_m",), [0.0, 0.0], "'observation_noise_std_m' must be a list of 3 numbers"),
        (("observation_noise_std_m",), [0.0, -0.01, 0.0], r"'observation_noise_std_m\[1\]' = -0.01 is out of range"),
        (("observation_noise_std_m",), [0.0, ".nan", 0.0], r"'observation_noise_std_m\[1\]' must be a number"),
        (("workspace", "low"), DELETE, "workspace: missing key 'low'"),
        (("workspace", "low"), [1.7, 0.4, 0.38], r"'workspace.low\[0\]' = 1.7 must be below 'workspace.high\[0\]'"),
        (("limits", "max_action"), 3.0, r"'limits.max_action' = 3.0 is out of range"),
        (("limits", "barrier_fraction"), "half", "'limits.barrier_fraction' must be a number"),
        (("limits", "envelope_margin_m"), -0.1, r"'limits.envelope_margin_m' = -0.1 is out of range"),
        (("limits",), [1.0, 2.0], "'limits' must be a mapping"),
        (("measurements",), "delay was 2", "'measurements' must be a mapping"),
        (("homing_s",), -0.5, r"'homing_s' = -0.5 is out of range \[0.0, 600.0\]"),
        (("homing_s",), "3 s", "'homing_s' must be a number"),
        (("homing_s",), 3600.0, r"'homing_s' = 3600.0 is out of range"),
        (("home",), [1.34, 0.75, 0.53], "'home' must be a mapping with 'position_m' and 'tolerance_m'"),
        (("home", "position_m"), DELETE, "home: missing key 'position_m'"),
        (("home", "position_m"), [1.34, 0.75], r"'home.position_m' must be a list of 3 numbers"),
        (("home", "position_m"), [1.34, 2.0, 0.53], r"'home.position_m\[1\]' = 2.0 lies outside the workspace"),
        (("home", "tolerance_m"), DELETE, "home: missing key 'tolerance_m'"),
        (("home", "tolerance_m"), 0.0, "'home.tolerance_m' = 0: a check with no tolerance refuses every real homing"),
        (("home", "tolerance_m"), 0.5, r"'home.tolerance_m' = 0.5 is out of range \[0.0, 0.1\]"),
        (("home", "tolerance_m"), "5 mm", "'home.tolerance_m' must be a number"),
        (("state_bounds",), [0.0, 0.05], "'state_bounds' must map state field names to \\[low, high\\]"),
        (("state_bounds",), {}, "'state_bounds' must map state field names"),
        (("state_bounds", "gripper_state"), 0.05, r"'state_bounds.gripper_state' must be \[low, high\]"),
        (("state_bounds", "gripper_state"), [0.05, 0.0], r"= \[0.05, 0.0\]: low must not exceed high"),
        (("state_bounds", "gripper_state"), [0.0, "5 cm"], r"'state_bounds.gripper_state\[1\]' must be a number"),
        (("state_bounds", "gripper_state"), [0.0, 1e9], r"'state_bounds.gripper_state\[1\]' = 1000000000.0 is out"),
        (("state_bounds", "Gripper State"), [0.0, 0.05], "'state_bounds' key 'Gripper State' is not a state field"),
    ],
)
def test_bad_values_name_the_key(tmp_path: Path, path: tuple[str, ...], value: Any, match: str) -> None:
    file = write(tmp_path, edit(path, value))
    with pytest.raises(RobotSpecError, match=match) as err:
        load_robot_spec(file)
    assert str(file) in str(err.value), "the error should name the file"


def test_homing_time_is_optional_and_round_trips() -> None:
    assert "homing_s" not in valid() and robot_spec_from_dict(valid()).homing_s == 0.0  # not measured
    spec = robot_spec_from_dict(edit(("homing_s",), 2.5))
    assert spec.homing_s == 2.5 and robot_spec_from_dict(spec.to_dict()).homing_s == 2.5


def test_the_home_pose_is_optional_and_round_trips(tmp_path: Path) -> None:
    shipped = load_robot_spec()
    assert shipped.home_position_m == (1.3418, 0.7491, 0.5347) and shipped.home_tolerance_m == 0.005
    assert load_robot_spec(save_robot_spec(shipped, tmp_path / "copy.yaml")) == shipped
    without = robot_spec_from_dict(edit(("home",), DELETE))
    assert without.home_position_m is None and without.home_tolerance_m == 0.0  # HOMED states go unchecked
    assert "home" not in without.to_dict() and robot_spec_from_dict(without.to_dict()) == without


def test_state_bounds_are_optional_and_round_trip(tmp_path: Path) -> None:
    shipped = load_robot_spec()
    assert shipped.state_bounds == {"gripper_state": (-0.001, 0.051)}
    without = robot_spec_from_dict(edit(("state_bounds",), DELETE))
    assert without.state_bounds is None and "state_bounds" not in without.to_dict()
    assert robot_spec_from_dict(shipped.to_dict()) == shipped


def test_nan_number_is_rejected() -> None:
    with pytest.raises(RobotSpecError, match="'control_period_s' = nan is out of range"):
        robot_spec_from_dict(edit(("control_period_s",), float("nan")))


def test_limits_section_is_optional_with_documented_defaults() -> None:
    spec = robot_spec_from_dict(edit(("limits",), DELETE))
    assert (spec.max_action, spec.max_action_rate, spec.barrier_fraction) == (1.0, 0.5, 0.5)
    assert (spec.watchdog_hold_s, spec.watchdog_stop_s, spec.envelope_margin_m) == (0.1, 0.5, 0.1)


@pytest.mark.parametrize(
    ("limits", "match"),
    [
        ({"watchdog_hold_s": -1.0}, "limits.watchdog_hold_s"),
        ({"watchdog_stop_s": "soon"}, "limits.watchdog_stop_s"),
        ({"watchdog_hold_s": 0.6, "watchdog_stop_s": 0.5}, "must be >= 'limits.watchdog_hold_s'"),
    ],
)
def test_bad_watchdog_names_the_key(limits: dict[str, Any], match: str) -> None:
    data = valid()
    data["limits"].update(limits)
    with pytest.raises(RobotSpecError, match=match):
        robot_spec_from_dict(data)


@pytest.mark.parametrize(
    ("section", "key"),
    [
        (None, "workspac"),
        ("limits", "max_acton"),
        ("action_delay", "stpes"),
        ("workspace", "lo"),
        ("actuator_gain", "upper_bund"),
        ("home", "tolerence_m"),
    ],
)
def test_unknown_keys_are_refused(section: str | None, key: str) -> None:
    # A misspelt limit must not silently fall back to its (looser) default.
    data = load_robot_spec().to_dict()
    (data if section is None else data[section])[key] = 1.0
    name = key if section is None else f"{section}.{key}"
    with pytest.raises(RobotSpecError, match=f"unknown key '{name}'; allowed keys: "):
        robot_spec_from_dict(data)


@pytest.mark.parametrize(
    ("delay", "period_s", "match"),
    [
        # 2 steps x 40 ms = 80 ms; 400 ms would be 10 steps: the two facts say different delays
        ({"ms": 400.0}, 0.04, r"'action_delay.ms' = 400 contradicts 'action_delay.steps' = 2 at 'control_period_s'"),
        (
            {"ms": 101.0},
            0.04,
            r"2 steps are 80 ms, and ms must lie within half a control period of that \(60..100 ms\)",
        ),
        ({"ms": 59.0}, 0.04, r"set ms to steps x control_period_s x 1000"),
        ({"ms": 80.0}, 0.02, r"2 steps are 40 ms"),  # the period changed, the delay in ms did not
        ({"steps": 0, "ms": 80.0, "range": [0, 2]}, 0.04, r"\(ms / 1000 / control_period_s = 2.00\)"),
    ],
)
def test_a_delay_in_ms_that_contradicts_the_steps_is_refused(
    delay: dict[str, Any], period_s: float, match: str
) -> None:
    data = valid()
    data["action_delay"].update(delay)
    data["control_period_s"] = period_s
    with pytest.raises(RobotSpecError, match=match):
        robot_spec_from_dict(data)


@pytest.mark.parametrize(("steps", "ms"), [(2, 80.0), (2, 60.0), (2, 100.0), (2, 85.3), (0, 0.0), (0, 20.0)])
def test_a_delay_in_ms_within_half_a_period_of_the_steps_loads(steps: int, ms: float) -> None:
    # 40 ms period: 2 steps cover 60..100 ms (a measured 85.3 ms rounds to 2 steps); 0 steps cover 0..20 ms
    data = valid()
    data["action_delay"].update(steps=steps, ms=ms, range=[0, 2])
    spec = robot_spec_from_dict(data)
    assert (spec.delay_steps, spec.delay_ms) == (steps, ms)


def test_what_the_calibration_probe_writes_passes_the_delay_check(tmp_path: Path) -> None:
    # calibration/probe.py writes delay_ms = steps x period x 1000, also for periods that are not exact in binary
    for period_s in (0.04, 0.033, 0.01, 0.1):
        for steps in range(9):
            spec = replace(
                load_robot_spec(),
                control_period_s=period_s,
                delay_steps=steps,
                delay_ms=steps * period_s * 1000.0,
                delay_range=(steps, steps),
                plausible_speed_m_s=10.0,
            )
            assert load_robot_spec(save_robot_spec(spec, tmp_path / "probe.yaml")) == spec


@pytest.mark.parametrize("date", ["not a date", "2026-13-01", "01.12.2026", "", 20261201, None, "2026-12-01 10:00"])
def test_a_date_that_is_not_an_iso_date_is_refused(date: Any) -> None:
    with pytest.raises(RobotSpecError, match=r"'date' = .* is not an ISO date: write the day .* as \"YYYY-MM-DD\""):
        robot_spec_from_dict(edit(("date",), date))


def test_an_unquoted_yaml_date_loads_as_the_same_iso_text(tmp_path: Path) -> None:
    text = DEFAULT_SIM_SPEC.read_text().replace('date: "2026-12-01"', "date: 2026-12-01")
    assert "date: 2026-12-01\n" in text
    assert load_robot_spec(write(tmp_path, text)).date == "2026-12-01"
