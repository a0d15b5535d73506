"""benchmarks/push_on_robot.py end to end on a tiny exported push package: a few episodes in pure simulation and on
the simulated cell over a pty, the glitch run, the JSON and markdown it writes."""

from __future__ import annotations

import json
from pathlib import Path

from benchmarks.push_on_robot import main
from deploy.export.exporter import ExportConfig, export_package

SMALL = {"allow_small_checks": True, "n_parity_obs": 300, "n_calibration_obs": 600, "n_episodes": 5}


def test_the_benchmark_compares_the_same_episodes_and_rejects_every_glitch(tmp_path: Path) -> None:
    import envs  # noqa: F401  (registers the ids)
    from robot_grpo.grpo import GRPO

    model = GRPO("MultiInputPolicy", "DelayedFetchPush-v0", policy_kwargs={"net_arch": [16]}, seed=0)
    config = ExportConfig(**SMALL, latency_calls=50, strict=False)
    package = export_package(model, tmp_path / "push", "DelayedFetchPushRobot-v0", config=config)
    out = tmp_path / "result"
    argv = ["--package", str(package), "--allow-failed-checks", "--episodes", "3", "--jump-episodes", "2"]
    assert main([*argv, "--mode", "lockstep", "--out", str(out)]) == 0
    result = json.loads(out.with_suffix(".json").read_text())
    assert len(result["sim"]["success"]) == len(result["robot"]["success"]) == 3
    assert result["jump"]["glitched_episodes"] == [0, 1]
    assert result["jump"]["counts"]["implausible_block_jump"] == 2 and result["jumps_rejected"]
    assert result["outside_total"] == 0
    assert "Must show" in out.with_suffix(".md").read_text()


def test_a_reach_package_is_refused_with_exit_2(capsys) -> None:
    reach = Path(__file__).resolve().parents[2] / "models" / "default"
    assert main(["--package", str(reach), "--out", "/nonexistent/never"]) == 2
    assert "has no block in its contract" in capsys.readouterr().err
