"""The calibration file: a valid file round-trips; a missing, malformed or out-of-range one names the key."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
import yaml

from calibration.schema import (
    DEFAULT_SIM_CALIBRATION,
    CalibrationError,
    calibration_from_dict,
    load_calibration,
    save_calibration,
)


def valid() -> dict[str, Any]:
    return yaml.safe_load(DEFAULT_SIM_CALIBRATION.read_text())


def write(tmp_path: Path, data: Any) -> Path:
    path = tmp_path / "robot.yaml"
    path.write_text(yaml.safe_dump(data) if not isinstance(data, str) else data)
    return path


def test_shipped_sim_calibration_loads() -> None:
    cal = load_calibration()
    assert cal.robot_id == "sim_fetch"
    assert cal.delay_steps == 2
    assert cal.delay_range == (2, 2)
    assert cal.control_period_s == pytest.approx(0.04)
    assert cal.delay_ms == pytest.approx(cal.delay_steps * cal.control_period_s * 1000)
    assert all(lo < hi for lo, hi in zip(cal.workspace_low, cal.workspace_high, strict=True))


def test_save_load_round_trip(tmp_path: Path) -> None:
    cal = load_calibration()
    path = save_calibration(cal, tmp_path / "sub" / "copy.yaml")
    assert load_calibration(path) == cal
    assert not list(tmp_path.glob("**/*.tmp"))


def test_missing_file_says_how_to_fix(tmp_path: Path) -> None:
    with pytest.raises(CalibrationError, match="does not exist.*calibrate"):
        load_calibration(tmp_path / "nope.yaml")


@pytest.mark.parametrize(
    ("text", "match"),
    [
        ("action_delay: [1, 2\n", "not valid YAML"),
        ("- 1\n- 2\n", "expected a mapping at the top level"),
        ("", "expected a mapping at the top level"),
    ],
)
def test_malformed_file(tmp_path: Path, text: str, match: str) -> None:
    with pytest.raises(CalibrationError, match=match):
        load_calibration(write(tmp_path, text))


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


DELETE = object()


@pytest.mark.parametrize(
    ("path", "value", "match"),
    [
        (("schema_version",), 2, "'schema_version' = 2"),
        (("robot_id",), "", "'robot_id' must be a non-empty string"),
        (("control_period_s",), DELETE, "missing key 'control_period_s'"),
        (("control_period_s",), -0.04, r"'control_period_s' = -0.04 is out of range"),
        (("action_delay",), DELETE, "missing key 'action_delay'"),
        (("action_delay",), 2, "action_delay: expected a mapping"),
        (("action_delay", "steps"), DELETE, "action_delay: missing key 'steps'"),
        (("action_delay", "steps"), 9, r"'action_delay.steps' = 9 is out of range \[0, 8\]"),
        (("action_delay", "steps"), 2.5, "'action_delay.steps' must be an integer"),
        (("action_delay", "steps"), True, "'action_delay.steps' must be an integer"),
        (("action_delay", "range"), [3, 1], "'action_delay.range' = \\[3, 1\\]: low must not exceed high"),
        (("action_delay", "range"), [1, 9], r"'action_delay.range\[1\]' = 9 is out of range"),
        (("action_delay", "range"), 2, r"'action_delay.range' must be \[low, high\]"),
        (("observation_noise_std_m",), [0.0, 0.0], "'observation_noise_std_m' must be a list of 3 numbers"),
        (("observation_noise_std_m",), [0.0, -0.01, 0.0], r"'observation_noise_std_m\[1\]' = -0.01 is out of range"),
        (("observation_noise_std_m",), [0.0, ".nan", 0.0], r"'observation_noise_std_m\[1\]' must be a number"),
        (("workspace", "low"), DELETE, "workspace: missing key 'low'"),
        (("workspace", "low"), [1.7, 0.4, 0.38], r"'workspace.low\[0\]' = 1.7 must be below 'workspace.high\[0\]'"),
        (("limits", "max_action"), 3.0, r"'limits.max_action' = 3.0 is out of range"),
        (("limits", "barrier_fraction"), "half", "'limits.barrier_fraction' must be a number"),
        (("limits",), [1.0, 2.0], "'limits' must be a mapping"),
    ],
)
def test_bad_values_name_the_key(tmp_path: Path, path: tuple[str, ...], value: Any, match: str) -> None:
    file = write(tmp_path, edit(path, value))
    with pytest.raises(CalibrationError, match=match) as err:
        load_calibration(file)
    assert str(file) in str(err.value), "the error should name the file"


def test_nan_number_is_rejected() -> None:
    data = edit(("control_period_s",), float("nan"))
    with pytest.raises(CalibrationError, match="'control_period_s' = nan is out of range"):
        calibration_from_dict(data)


def test_limits_section_is_optional() -> None:
    cal = calibration_from_dict(edit(("limits",), DELETE))
    assert (cal.max_action, cal.max_action_rate, cal.barrier_fraction) == (1.0, 0.5, 0.5)


@pytest.mark.parametrize(
    ("section", "key"),
    [(None, "workspac"), ("limits", "max_acton"), ("action_delay", "stpes"), ("workspace", "lo")],
)
def test_unknown_keys_are_refused(section: str | None, key: str) -> None:
    # A misspelt limit must not silently fall back to its (looser) default.
    data = load_calibration().to_dict()
    (data if section is None else data[section])[key] = 1.0
    name = key if section is None else f"{section}.{key}"
    with pytest.raises(CalibrationError, match=f"unknown key '{name}'; allowed keys: "):
        calibration_from_dict(data)
