"""The Fetch env takes its defaults (delay, delay range, noise) from the robot spec; bad files fail clearly."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import pytest
from spec_edit import edited_spec

import envs  # noqa: F401  (registers the ids)
from deploy.robot_spec import RobotSpecError
from envs.delayed_fetch_reach import DelayedFetchReachEnv


def test_default_is_the_shipped_sim_calibration() -> None:
    env = DelayedFetchReachEnv()
    assert env.delay_range == (2, 2)
    assert env.delay == 2
    np.testing.assert_array_equal(env.obs_noise_std_m, [0.0, 0.0, 0.0])
    assert env.robot_spec.robot_id == "sim_fetch"


def test_delay_and_noise_come_from_the_file(tmp_path: Path) -> None:
    path = edited_spec(
        tmp_path,
        action_delay__steps=3,
        action_delay__ms=120.0,
        action_delay__range=[3, 3],
        observation_noise_std_m=[0.01, 0.0, 0.002],
    )
    env = gym.make("DelayedFetchReach-v0", spec=str(path)).unwrapped
    assert env.delay_range == (3, 3)
    assert env.contract.history_len == 3
    np.testing.assert_array_equal(env.obs_noise_std_m, [0.01, 0.0, 0.002])
    _, info = env.reset(seed=0)
    assert info["delay"] == 3


def test_the_files_delay_range_is_randomized_over(tmp_path: Path) -> None:
    """deploy/robot_spec.py: ``action_delay.range`` is the inclusive range the sim randomizes over."""
    path = edited_spec(tmp_path, action_delay__steps=2, action_delay__range=[1, 3])
    env = DelayedFetchReachEnv(spec=path)
    assert env.delay_range == (1, 3)
    assert {env.reset(seed=s)[1]["delay"] for s in range(30)} == {1, 2, 3}


def test_explicit_arguments_override_the_file(tmp_path: Path) -> None:
    path = edited_spec(tmp_path, action_delay__steps=3, action_delay__ms=120.0, action_delay__range=[1, 3])
    assert DelayedFetchReachEnv(spec=path, delay=0).delay_range == (0, 0)
    assert DelayedFetchReachEnv(spec=path, delay_range=(2, 4)).delay_range == (2, 4)
    env = DelayedFetchReachEnv(spec=path, obs_noise_std_m=0.005)
    np.testing.assert_array_equal(env.obs_noise_std_m, [0.005] * 3)


def test_missing_calibration_file_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(RobotSpecError, match="does not exist"):
        DelayedFetchReachEnv(spec=tmp_path / "missing.yaml")


def test_malformed_calibration_file_is_a_clear_error(tmp_path: Path) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text("schema_version: 2\naction_delay: {steps: 2\n")
    with pytest.raises(RobotSpecError, match="not valid YAML"):
        DelayedFetchReachEnv(spec=path)


def test_a_spec_at_another_control_period_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="runs at 0.02 s per control step, the simulated Fetch arm at 0.04 s"):
        DelayedFetchReachEnv(
            spec=edited_spec(tmp_path, control_period_s=0.02, action_delay__ms=40.0, plausible_speed_m_s=5.0)
        )


@pytest.mark.parametrize(
    ("changes", "match"),
    [
        ({"action_delay__steps": 12}, r"'action_delay.steps' = 12 is out of range \[0, 8\]"),
        ({"observation_noise_std_m": [0.0, 0.5, 0.0]}, r"'observation_noise_std_m\[1\]' = 0.5 is out of range"),
        ({"action_delay__range": [2, 1]}, "'action_delay.range' = \\[2, 1\\]"),
    ],
)
def test_out_of_range_calibration_names_the_key(tmp_path: Path, changes: dict[str, Any], match: str) -> None:
    with pytest.raises(RobotSpecError, match=match):
        DelayedFetchReachEnv(spec=edited_spec(tmp_path, **changes))
