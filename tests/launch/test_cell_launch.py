"""``robot-grpo train`` / ``eval`` on the two-arm cell: launch checks, and a tiny run through both jobs."""

from __future__ import annotations

import json

import pytest

from launch import job_eval, job_train
from launch.jobs import LaunchError, load_launch, validate_launch

CELL = {"id": "TwoArmCell-v0", "delay": 1}


@pytest.mark.parametrize(
    "data, message",
    [
        ({"job": "train", "env": {"min_separation_m": 0.1}}, "min_separation_m' is a key of the two-arm cell"),
        ({"job": "train", "train": {"eval_every": 100}}, "eval_every' is a key of the two-arm cell"),
        ({"job": "train", "env": {**CELL, "obs_noise_std_m": 0.01}}, "not supported by TwoArmCell-v0"),
        ({"job": "population", "env": CELL}, "'population' is not available"),
        ({"job": "train", "env": CELL, "scale": {"backend": "ray"}}, "scale.backend=threaded"),
    ],
)
def test_cell_launch_checks(data: dict, message: str) -> None:
    with pytest.raises(LaunchError, match=message):
        validate_launch(data, source="t.yaml")


def test_shipped_cell_launch_file_validates() -> None:
    config = load_launch("launch/train_cell.yaml")
    assert config["env"]["id"] == "TwoArmCell-v0" and config["train"]["hyperparameters"]["sharing"] == "heads"


def test_unknown_cell_hyperparameter_is_refused(tmp_path) -> None:
    config = validate_launch(
        {"job": "train", "env": CELL, "train": {"hyperparameters": {"shareing": "heads"}}, "output": str(tmp_path)}
    )
    with pytest.raises(LaunchError, match="allowed keys: .*sharing"):
        job_train.main(config)


def test_train_then_eval_the_cell(tmp_path) -> None:
    hyper = {"sharing": "agent_id", "group_size": 2, "n_groups": 1, "n_epochs": 1, "policy_kwargs": {"net_arch": [8]}}
    train = validate_launch(
        {
            "job": "train",
            "name": "cell",
            "env": CELL,
            "train": {"total_timesteps": 200, "eval_episodes": 2, "eval_every": 100, "hyperparameters": hyper},
            "output": str(tmp_path),
        }
    )
    assert job_train.main(train) in (0, 1)  # 1: the target was not reached in 200 steps, as expected
    summary = json.loads((tmp_path / "cell" / "train_summary.json").read_text())
    assert summary["env_steps"] == 200 and summary["sharing"] == "agent_id"
    curve = json.loads((tmp_path / "cell" / "learning_curve.json").read_text())
    assert [p["steps"] for p in curve] == [100, 200] and all(p["episodes"] == 2 for p in curve)
    evaluation = validate_launch(
        {
            "job": "eval",
            "env": CELL,
            "checkpoint": summary["model"],
            "episodes": 2,
            "output": str(tmp_path),
        }
    )
    assert job_eval.main(evaluation) == 0
    result = json.loads((tmp_path / "eval" / "eval.json").read_text())
    assert result["episodes"] == 2 and 0.0 <= result["success"] <= 1.0
