"""``robot-grpo cell``: the simulated cell, the supervisor and one runtime process per arm, from the CLI; with the
scripted goal seeker and with the two arm packages exported from a tiny cell model; packages that are not each
arm's own are refused before anything starts (exit 2)."""

from __future__ import annotations

import json
import shutil
import socket
from pathlib import Path

import pytest
from stable_baselines3.common.env_util import make_vec_env

from deploy.export.cell_arm import export_cell_arms
from deploy.export.exporter import ExportConfig
from launch.cli import main
from robot_grpo import CellGRPO

ROOT = Path(__file__).resolve().parents[2]
CELL = {"delay": 2, "max_episode_steps": 10}  # the shipped sim spec's delay: what the simulated cell's arms have


def free_udp_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def run_cli(tmp_path: Path, *settings: str) -> int:
    args = ["cell", "--set", f"output={tmp_path}", "--set", f"supervisor_port={free_udp_port()}"]
    for setting in settings:
        args += ["--set", setting]
    return main(args)


@pytest.fixture(scope="module")
def arm_packages(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Both arms' packages of a CellGRPO trained for 200 cell steps (small export checks)."""
    vec = make_vec_env("TwoArmCell-v0", n_envs=4, seed=0, env_kwargs={**CELL, "end_on_violation": False})
    model = CellGRPO(
        "MultiInputPolicy", vec, seed=0, group_size=2, n_groups=2, batch_size=64, n_epochs=1,
        policy_kwargs={"net_arch": [16]},
    )  # fmt: skip
    model.learn(200)
    checks = ExportConfig(
        n_parity_obs=300, n_calibration_obs=300, n_episodes=3, latency_calls=20, build_engine=False,
        allow_small_checks=True,
    )  # fmt: skip
    out = tmp_path_factory.mktemp("cell") / "packages"
    export_cell_arms(model, out, CELL, checks)
    return out


def test_the_cell_runs_from_the_cli_with_the_scripted_policy(tmp_path: Path) -> None:
    assert run_cli(tmp_path, "episodes=2", "episode_steps=25") == 0
    report = json.loads((tmp_path / "cell" / "cell_report.json").read_text())
    assert report["episodes"] == 2 and report["policies"] == "goal_seeker" and report["barrier"]
    assert report["separation"]["separation_steps"] == 0  # the physics' verdict: never closer than 0.10 m
    assert report["separation"]["steps"] > 2 * 25  # the cell stepped both episodes
    for arm, summary in enumerate(report["arms"]):
        assert summary["arm"] == arm and len(summary["episodes"]) == 2
        assert summary["link_counts"]["partner_reports"] > 0  # the supervisor forwarded the partner's reports
        assert summary["timing"]["latency_s_n"] > 0
    assert "## Cell" in (tmp_path / "cell" / "report.md").read_text()


def test_the_cell_runs_both_arm_packages(arm_packages: Path, tmp_path: Path) -> None:
    assert run_cli(tmp_path, f"packages={arm_packages}", "episodes=1", "episode_steps=15") == 0
    report = json.loads((tmp_path / "cell" / "cell_report.json").read_text())
    assert report["policies"] == str(arm_packages)
    assert report["separation"]["separation_steps"] == 0
    assert all(len(summary["episodes"]) == 1 and "error" not in summary for summary in report["arms"])


def test_swapped_or_missing_arm_packages_are_refused(arm_packages: Path, tmp_path: Path, capsys) -> None:
    swapped = tmp_path / "swapped"
    shutil.copytree(arm_packages / "arm_1", swapped / "arm_0")
    shutil.copytree(arm_packages / "arm_0", swapped / "arm_1")
    assert run_cli(tmp_path, f"packages={swapped}") == 2
    assert "is the package of arm_1, not arm_0" in capsys.readouterr().err
    missing = tmp_path / "missing"
    shutil.copytree(arm_packages / "arm_0", missing / "arm_0")
    assert run_cli(tmp_path, f"packages={missing}") == 2
    assert "arm_1 does not exist" in capsys.readouterr().err


def test_a_single_arm_package_is_refused(tmp_path: Path, capsys) -> None:
    single = tmp_path / "single"
    for arm in (0, 1):
        shutil.copytree(ROOT / "models" / "default", single / f"arm_{arm}")
    assert run_cli(tmp_path, f"packages={single}") == 2
    assert "is a single-arm package" in capsys.readouterr().err
