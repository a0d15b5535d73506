"""Every command works from a folder that is not the checkout: the defaults that ship with robot-grpo (the robot
spec, the launch files, the default package and checkpoint) are found beside the installed packages, while the
paths a user gives (outputs under runs/, a checkpoint train wrote there) stay relative to the current folder.

The CLI runs as a subprocess with ``cwd=tmp_path``; the checkout is on PYTHONPATH only so that this checkout's code
is the one imported.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
CLI_TIMEOUT_S = 300


def cli(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run(
        [sys.executable, "-m", "launch.cli", *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=CLI_TIMEOUT_S,
    )
    assert "Traceback" not in done.stderr, done.stderr
    return done


def resolved(cwd: Path, name: str) -> dict:
    return yaml.safe_load((cwd / "runs" / name / "resolved_config.yaml").read_text())


def test_run_calibrate_eval_from_another_folder_use_the_shipped_defaults(tmp_path: Path):
    run = cli(
        tmp_path,
        "run",
        "--set",
        "robot.lockstep=true",
        "--set",
        "period_s=0.005",
        "--set",
        "episodes=2",
        "--set",
        "episode_steps=10",
    )
    assert run.returncode == 0, run.stderr
    config = resolved(tmp_path, "run_sim_robot")
    assert config["package"] == str(ROOT / "models" / "default")
    assert config["calibration"] == str(ROOT / "calibration" / "sim_fetch.yaml")
    report = json.loads((tmp_path / "runs" / "run_sim_robot" / "run_report.json").read_text())
    assert report["episodes"] == 2 and report["robot_spec"]["robot_id"] == "sim_fetch"

    calibrate = cli(tmp_path, "calibrate", "--set", "repeats=1")
    assert calibrate.returncode == 0, calibrate.stderr
    assert (tmp_path / "runs" / "calibrate" / "sim_fetch.yaml").is_file()

    evaluate = cli(tmp_path, "eval", "--set", "episodes=2")
    assert evaluate.returncode == 0, evaluate.stderr
    assert resolved(tmp_path, "eval")["checkpoint"] == str(ROOT / "models" / "default")

    # a launch file named as shipped, and a user path that is relative to this folder, not the checkout's
    hard = cli(tmp_path, "launch", "shipped:launch/run_serial.yaml", "--set", "package=models/default")
    assert hard.returncode == 2
    assert "robot-grpo: error: models/default: is not a policy package folder" in hard.stderr, hard.stderr


@pytest.mark.slow
def test_train_then_export_its_checkpoint_from_another_folder(tmp_path: Path):
    train = cli(
        tmp_path,
        "train",
        "--set",
        "train.total_timesteps=800",
        "--set",
        "train.eval_episodes=2",
        "--set",
        "train.target_success=0.0",  # exit 0: the target is reached at the first evaluation
    )
    assert train.returncode == 0, train.stderr
    assert resolved(tmp_path, "train_fetch_reach")["env"]["calibration"] == str(ROOT / "calibration" / "sim_fetch.yaml")
    assert (tmp_path / "runs" / "train_fetch_reach" / "model.zip").is_file()

    export = cli(tmp_path, "export")  # its default checkpoint: runs/train_fetch_reach/model.zip, in this folder
    assert export.returncode == 0, export.stderr
    assert (tmp_path / "runs" / "export" / "package" / "manifest.json").is_file()


SHIPPED_FOLDERS = ("calibration/", "models/", "launch/")  # what a launch value can name of the installation


def _strings(value: object, where: str):
    """Every string in a loaded launch file, with where it sits (``key.key[i]``)."""
    if isinstance(value, dict):
        for key, item in value.items():
            yield from _strings(item, f"{where}.{key}" if where else str(key))
    elif isinstance(value, list):
        for i, item in enumerate(value):
            yield from _strings(item, f"{where}[{i}]")
    elif isinstance(value, str):
        yield where, value


@pytest.mark.parametrize("launch_file", sorted((ROOT / "launch").glob("*.yaml")), ids=lambda p: p.name)
def test_a_shipped_launch_file_names_shipped_files_as_shipped(launch_file: Path) -> None:
    # a bare calibration/..., models/... or launch/... is relative to the user's folder and fails outside the
    # checkout (train_cell.yaml's calibration did: "robot spec file calibration/sim_fetch.yaml does not exist")
    bare = [
        f"{key}: {value}"
        for key, value in _strings(yaml.safe_load(launch_file.read_text()), "")
        if value.startswith(SHIPPED_FOLDERS)
    ]
    assert not bare, f"{launch_file.name}: write shipped:<path> for {bare}"
