"""``robot-grpo run`` with a push package: the simulated push cell and its goals; a package on the wrong robot is
refused by name, with exit 2."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from deploy.export.exporter import ExportConfig, export_package
from launch.cli import main

SMALL = {"allow_small_checks": True, "n_parity_obs": 300, "n_calibration_obs": 600, "n_episodes": 5}
PUSH_SPEC = "shipped:calibration/sim_fetch_push.yaml"


@pytest.fixture(scope="module")
def push_package(tmp_path_factory: pytest.TempPathFactory) -> Path:
    import envs  # noqa: F401  (registers the ids)
    from robot_grpo.grpo import GRPO

    model = GRPO("MultiInputPolicy", "DelayedFetchPush-v0", policy_kwargs={"net_arch": [16]}, seed=0)
    folder = tmp_path_factory.mktemp("push") / "package"
    return export_package(model, folder, "DelayedFetchPushRobot-v0", config=ExportConfig(**SMALL, latency_calls=50))


def run(tmp_path: Path, *settings: str) -> int:
    args = ["run", "--name", "push", "--set", f"output={tmp_path}", "--set", "episodes=2"]
    args += ["--set", "robot.lockstep=true", "--set", "period_s=0.02"]
    for setting in settings:
        args += ["--set", setting]
    return main(args)


def test_a_push_package_runs_on_the_simulated_push_cell(push_package: Path, tmp_path: Path) -> None:
    assert run(tmp_path, f"package={push_package}", f"calibration={PUSH_SPEC}") == 0
    summary = json.loads((tmp_path / "push" / "run_report.json").read_text())
    results = summary["episode_results"]
    assert len(results) == 2 and all(not episode["aborted"] for episode in results)
    assert all(
        episode["goal"][2] == pytest.approx(0.4247, abs=1e-3) for episode in results
    )  # the block's, on the table


def test_a_push_package_on_the_reach_robot_is_refused_by_name(push_package: Path, tmp_path: Path, capsys) -> None:
    assert run(tmp_path, f"package={push_package}") == 2
    err = capsys.readouterr().err
    assert "block_tracker_missing" in err and "the override cannot help" in err


def test_the_reach_package_on_the_push_cell_is_refused_by_name(tmp_path: Path, capsys) -> None:
    assert run(tmp_path, f"calibration={PUSH_SPEC}") == 2
    assert "block_not_read" in capsys.readouterr().err
