"""The train job's check behind the safety filter: counts barrier interventions, skips envs without a robot."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from launch.jobs import validate_launch
from launch.training import safety_filter_check, shipped_action

CHECKPOINT = Path(__file__).resolve().parents[2] / "models" / "default_checkpoint.zip"
SEEDS = list(range(1_000_000, 1_000_020))
FETCH = ("DelayedFetchReach-v0", {"delay": 2})


def constant(action: list[float]):
    return lambda flat: np.tile(np.asarray(action, dtype=np.float32), (flat.shape[0], 1))


def test_a_policy_that_drives_into_the_table_is_counted():
    # Full speed down (5 cm per step): the barrier lets the gripper close at most half the gap to the box's
    # floor per step, so it intervenes on every tick once the floor is near.
    out = safety_filter_check(*FETCH, constant([0.0, 0.0, -1.0, 0.0]), SEEDS[:3])
    assert out is not None and out["error"] == ""
    assert out["interventions_per_episode"] > 10 and out["success_rate"] == 0.0


def test_holding_still_needs_no_intervention():
    out = safety_filter_check(*FETCH, constant([0.0, 0.0, 0.0, 0.0]), SEEDS[:3])
    assert out is not None and out["interventions_per_episode"] == 0.0 and out["safe_stops"] == 0


def test_point_reach_has_no_robot_calibration():
    assert safety_filter_check("PointReach-v0", {"delay": 1}, constant([0.0, 0.0, 0.0]), SEEDS[:1]) is None


@pytest.mark.skipif(not CHECKPOINT.is_file(), reason="models/default_checkpoint.zip is absent")
def test_the_shipped_checkpoint_reaches_its_goals_with_the_filter_only_near_the_table():
    from robot_grpo import GRPO

    out = safety_filter_check(*FETCH, shipped_action(GRPO.load(str(CHECKPOINT), device="cpu")), SEEDS)
    # the box's floor is the table top (z 0.42 m): goals just above it bring the barrier in on the way down (measured
    # 1.8 per episode on these seeds); none of its interventions is a stop
    assert out["success_rate"] >= 0.9 and out["interventions_per_episode"] <= 3.0 and out["safe_stops"] == 0, out


def test_train_job_writes_the_check_into_its_summary(tmp_path: Path, capsys):
    from launch.job_train import main

    config = validate_launch(
        {
            "job": "train",
            "name": "tiny",
            "env": {"id": "DelayedFetchReach-v0", "delay": 2},
            "train": {"total_timesteps": 2400, "eval_episodes": 4, "target_success": 0.99},
            "output": str(tmp_path),
        }
    )
    assert main(config) == 1  # one update cannot reach 99%: the job says so by its exit code
    summary = json.loads((tmp_path / "tiny" / "train_summary.json").read_text())
    filtered = summary["behind_safety_filter"]
    assert set(filtered) == {"success_rate", "interventions_per_episode", "safe_stops", "skipped_goals", "error"}
    assert "interventions per episode" in capsys.readouterr().out


def test_train_job_runs_the_delayed_push_launch_file(tmp_path: Path):
    """launch/train_delayed_push.yaml at a tiny budget: an env without a robot contract is evaluated by predict."""
    from launch.job_train import main
    from launch.jobs import load_launch

    config = load_launch(Path(__file__).resolve().parents[2] / "launch" / "train_delayed_push.yaml")
    config["train"].update(total_timesteps=400, eval_episodes=2, target_success=1.0)
    config["train"]["hyperparameters"].update(group_size=2, n_groups=2, batch_size=256, n_epochs=1)
    # the launch file's clone and DAgger round, small
    small = {"episodes": 50, "epochs": 1, "dagger_rounds": 1, "dagger_episodes": 50, "dagger_epochs": 1}
    config["train"]["demonstrations"].update(small)
    config["output"] = str(tmp_path)
    assert main(config) == 1  # two updates cannot reach 100%
    summary = json.loads((tmp_path / "train_delayed_push" / "train_summary.json").read_text())
    assert summary["env_id"] == "DelayedFetchPush-v0" and summary["env_steps"] == 400
    cloned = summary["demonstrations"]  # GRPO started from the clone; its env steps are reported beside GRPO's
    assert cloned["episodes"] == 50 and cloned["env_steps"] == (50 + 50) * 50
    assert cloned["rows"] == 50 * cloned["successes"] + 50 * 50  # every state the clone drove to is labelled
    assert summary["behind_safety_filter"] is None  # no calibration: no robot behind a filter
    assert 0.0 <= summary["final_success"] <= 1.0
