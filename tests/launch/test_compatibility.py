"""``robot-grpo run`` checks the robot spec against the package before the first command: a k=2 package on a robot
calibrated at k=6 is refused naming both; the explicit override runs, logged and recorded in the run report."""

from __future__ import annotations

import json
import logging
from dataclasses import replace
from pathlib import Path

import pytest

from deploy.robot_spec import load_robot_spec, save_robot_spec
from deploy.runtime.compatibility import CompatibilityError, check_compatibility, mismatches
from deploy.runtime.package import load_package
from launch.cli import main
from launch.job_run import shortfall

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "models" / "default"
K6 = {"delay_steps": 6, "delay_ms": 240.0, "delay_range": (6, 6)}

pytestmark = pytest.mark.skipif(not (PACKAGE / "manifest.json").is_file(), reason="models/default is absent")


def test_the_shipped_package_fits_the_shipped_sim_robot():
    package = load_package(PACKAGE)
    assert mismatches(load_robot_spec(), package.contract, package.action_delay_steps, "models/default") == []


@pytest.mark.parametrize(
    ("changes", "match"),
    [
        (K6, r"action delay of 6 control steps \(240 ms\), package models/default was trained for 2..2 steps"),
        ({"delay_steps": 1, "delay_ms": 40.0, "delay_range": (1, 3)}, r"1 control steps \(40 ms\), range 1..3"),
        ({"control_period_s": 0.02}, "runs at 0.02 s per control step, package models/default at 0.04 s"),
        ({"command_scale_m": 0.1}, "moves 0.1 m per command unit, package models/default commands 0.05 m per unit"),
    ],
)
def test_a_mismatch_names_both_values_and_the_fixes(changes, match):
    spec = replace(load_robot_spec(), **changes)
    package = load_package(PACKAGE)
    trained = package.action_delay_steps
    with pytest.raises(CompatibilityError, match=match) as err:
        check_compatibility(spec, package.contract, trained, "models/default")
    assert "recalibrate" in str(err.value) and "override_compatibility=true" in str(err.value)
    assert "\n" not in str(err.value)
    assert check_compatibility(spec, package.contract, trained, "models/default", override=True)  # not raised


def short_run_args(tmp_path: Path, name: str, **settings: object) -> list[str]:
    """``robot-grpo run`` on the lock-step simulated robot, 2 short episodes, with ``settings`` (dotted keys as
    ``robot__delay``) set on top."""
    base = {"robot__lockstep": "true", "period_s": "0.005", "episodes": "2", "episode_steps": "10"}
    args = ["run", "--name", name]
    for key, value in {**base, **settings, "output": tmp_path}.items():
        args += ["--set", f"{key.replace('__', '.')}={value}"]
    return args


def run_args(tmp_path: Path, spec_path: Path, *extra: str) -> list[str]:
    return [*short_run_args(tmp_path, "k6", calibration=spec_path, robot__delay=6), *extra]


def test_run_refuses_then_runs_with_the_explicit_override(tmp_path: Path, capsys, caplog):
    spec_path = save_robot_spec(replace(load_robot_spec(), robot_id="arm_k6", **K6), tmp_path / "arm_k6.yaml")
    assert main(run_args(tmp_path, spec_path)) == 2
    err = capsys.readouterr().err
    assert "robot 'arm_k6' has an action delay of 6 control steps (240 ms)" in err and "trained for 2..2" in err
    assert not (tmp_path / "k6" / "ticks.mcap").exists()  # refused before the first command

    with caplog.at_level(logging.WARNING):
        assert main(run_args(tmp_path, spec_path, "--set", "override_compatibility=true")) == 0
    assert any("override_compatibility: running although" in r.getMessage() for r in caplog.records)
    report = json.loads((tmp_path / "k6" / "run_report.json").read_text())
    assert report["episodes"] == 2
    assert any("action delay of 6" in text for text in report["compatibility_overridden"])
    assert report["robot_spec"]["robot_id"] == "arm_k6"


def test_run_follows_a_package_store(tmp_path: Path):
    """``follow_store``: the run's policy is a PolicySlot that a store follower swaps (wiring smoke test; the swap
    itself is tested in tests/deploy/runtime/test_hotswap.py)."""
    from deploy.finetune.promote import PackageStore

    store = PackageStore(tmp_path / "store")
    store.install(PACKAGE, "shipped")
    store.promote("shipped", {"passed": True, "reasons": ["initial"]})
    args = short_run_args(tmp_path, "follow", package=store.resolve_current(), follow_store=store.root)
    assert main(args) == 0
    report = json.loads((tmp_path / "follow" / "run_report.json").read_text())
    assert report["episodes"] == 2 and report["swaps"] == []
    assert report["follower"] == {"swaps": [], "refusals": 0, "refused": [], "watch_errors": 0, "last_error": None}


def test_a_lossy_link_still_serves_every_episode(tmp_path: Path):
    """1% of the bytes corrupted both ways: frames are lost, HOMEs resent, ticks held; the run's tick budget
    allows for it and every episode is served (exit 0)."""
    args = [
        "run",
        "--name",
        "lossy",
        "--set",
        "robot.lockstep=true",
        "--set",
        "robot.byte_error_rate=0.01",
        "--set",
        "period_s=0.01",
        "--set",
        "episodes=8",
        "--set",
        "episode_steps=30",
        "--set",
        f"output={tmp_path}",
    ]
    assert main(args) == 0
    report = json.loads((tmp_path / "lossy" / "run_report.json").read_text())
    assert report["episodes"] == 8


def test_a_short_run_says_how_it_ended_and_what_the_link_lost():
    """A run that served too few episodes names its last transition, its safe stops and the link's losses."""
    summary = {
        "episodes": 0,
        "counts": {"states": 73, "robot_frame_gaps": 66, "safe_stops": 2},
        "transitions": [
            {"tick": 36, "from": "WAIT_FRESH", "to": "HOLD", "reason": "fresh state"},
            {"tick": 1094, "from": "HOLD", "to": "DONE", "reason": "tick limit reached"},
        ],
    }
    line = shortfall(summary, 8)
    assert line.startswith("served 0 of 8 episodes")
    assert "ended in HOLD: tick limit reached" in line
    assert "2 safe stops" in line
    assert "66 gaps in the robot's numbering over 73 states" in line
    assert "\n" not in line
    clean = shortfall({"episodes": 5, "counts": {"states": 900}, "transitions": []}, 8)
    assert clean == "served 5 of 8 episodes"  # nothing lost, nothing stopped: no noise
