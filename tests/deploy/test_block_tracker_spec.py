"""The robot spec's block_tracker section: parsed, refused with the key named, written back, optional."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from deploy.robot_spec import DEFAULT_SIM_SPEC, load_robot_spec, robot_spec_from_dict
from deploy.robot_spec_sections import RobotSpecError

PUSH_SPEC = DEFAULT_SIM_SPEC.with_name("sim_fetch_push.yaml")


def push_data() -> dict:
    return yaml.safe_load(Path(PUSH_SPEC).read_text())


def test_the_push_cell_spec_states_the_tracker_noise_and_rate() -> None:
    tracker = load_robot_spec(PUSH_SPEC).block_tracker
    assert tracker is not None
    assert tracker.noise_std_m == (0.001, 0.001, 0.001)
    assert tracker.rate_hz == 25.0
    assert tracker.steps_per_reading(0.04) == 1  # a reading every control step
    assert load_robot_spec(DEFAULT_SIM_SPEC).block_tracker is None  # the reach robot reports no block


def test_the_section_round_trips_through_to_dict() -> None:
    spec = load_robot_spec(PUSH_SPEC)
    assert robot_spec_from_dict(spec.to_dict()) == spec


def test_a_slower_tracker_holds_its_reading_for_several_steps() -> None:
    data = push_data()
    data["block_tracker"]["rate_hz"] = 5.0
    assert robot_spec_from_dict(data).block_tracker.steps_per_reading(0.04) == 5  # 25 Hz / 5 Hz


@pytest.mark.parametrize(
    ("key", "value", "message"),
    [
        ("rate_hz", 50.0, "above the control rate"),
        ("noise_std_m", [0.001, 0.001], "block_tracker.noise_std_m' must be a list of 3"),
        ("gripper_near_m", 0.0, "block_tracker.gripper_near_m' = 0.0 is out of range"),
        ("table_high", [1.55, 0.30, 0.60], r"table_low\[1\]' = 0.4 must be below"),
        ("noise_mm", 1.0, "unknown key 'block_tracker.noise_mm'"),
    ],
)
def test_a_bad_tracker_key_is_refused_by_name(key: str, value: object, message: str) -> None:
    data = push_data()
    data["block_tracker"][key] = value
    with pytest.raises(RobotSpecError, match=message):
        robot_spec_from_dict(data)
