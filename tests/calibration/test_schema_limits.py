"""The calibration file's safety-filter limits (watchdog) and the probe's measurements section."""

from __future__ import annotations

import copy
from dataclasses import replace
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


def test_watchdog_defaults_when_absent():
    data = valid()
    data["limits"].pop("watchdog_hold_s", None)
    data["limits"].pop("watchdog_stop_s", None)
    cal = calibration_from_dict(data)
    assert (cal.watchdog_hold_s, cal.watchdog_stop_s) == (0.1, 0.5)


@pytest.mark.parametrize(
    ("limits", "match"),
    [
        ({"watchdog_hold_s": -1.0}, "limits.watchdog_hold_s"),
        ({"watchdog_stop_s": "soon"}, "limits.watchdog_stop_s"),
        ({"watchdog_hold_s": 0.6, "watchdog_stop_s": 0.5}, "must be >= 'limits.watchdog_hold_s'"),
    ],
)
def test_bad_watchdog_names_the_key(limits, match):
    data = copy.deepcopy(valid())
    data["limits"].update(limits)
    with pytest.raises(CalibrationError, match=match):
        calibration_from_dict(data)


def test_limits_and_measurements_must_be_mappings():
    data = valid()
    data["limits"] = [1, 2]
    with pytest.raises(CalibrationError, match="'limits' must be a mapping"):
        calibration_from_dict(data)
    data = valid()
    data["measurements"] = "delay was 2"
    with pytest.raises(CalibrationError, match="'measurements' must be a mapping"):
        calibration_from_dict(data)


def test_measurements_round_trip(tmp_path):
    cal = replace(
        load_calibration(),
        watchdog_hold_s=0.08,
        watchdog_stop_s=0.4,
        measurements={"delay_runs_steps": [2, 2, 2], "reach_limited_by": {"x_low": "safe_box"}},
    )
    back = load_calibration(save_calibration(cal, tmp_path / "r.yaml"))
    assert back == cal
    assert back.measurements["delay_runs_steps"] == [2, 2, 2]
