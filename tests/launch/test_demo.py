"""The quick demo end to end: shipped package -> calibrate -> run -> drift -> line logs -> fine-tune -> run.

Small budgets (a few episodes per stage, a 10-episode gate) so it fits the test suite; the full demo is
`make demo`. Needs the shipped package in models/default (`make model` rebuilds it).
"""

from pathlib import Path

import pytest
import yaml

from launch.cli import main

ROOT = Path(__file__).resolve().parents[2]
SHIPPED = ROOT / "models" / "default" / "manifest.json"


@pytest.mark.slow
@pytest.mark.skipif(not SHIPPED.is_file(), reason="models/default (the shipped package) is absent")
def test_quick_demo_end_to_end(tmp_path, monkeypatch):
    monkeypatch.chdir(ROOT)  # the launch files name models/default relative to the checkout
    overrides = [
        f"output={tmp_path}",
        "episodes=3",
        "line_targets=2",
        "line_attempts=8",
        "gate_episodes=10",
        "robot.lockstep=true",
    ]
    args = ["demo", "--quick", "--name", "quick"]
    for item in overrides:
        args += ["--set", item]
    assert main(args) == 0
    run = tmp_path / "quick"
    report = (run / "report.md").read_text()
    for heading in ("## Calibration", "## Success on the simulated robot", "## Online fine-tuning", "## Stage times"):
        assert heading in report
    assert (run / "latency.png").stat().st_size > 0
    assert yaml.safe_load((run / "resolved_config.yaml").read_text())["quick"] is True
    calibration = yaml.safe_load((run / "calibration.yaml").read_text())
    assert calibration["action_delay"]["steps"] == 2  # the simulated robot's delay, measured through the link
    for stage in ("run_base", "run_drifted", "line", "run_finetuned"):
        assert (run / stage / "ticks.mcap").is_file()
    assert main(["report", str(run)]) == 0  # robot-grpo report on the demo's runs: one report per stage
    for stage in ("run_base", "run_drifted", "line", "run_finetuned"):
        assert "## Interventions" in (run / stage / "report" / "report.md").read_text()
        assert (run / stage / "report" / "positions.png").stat().st_size > 0
    drifted = yaml.safe_load((run / "calibration_drifted.yaml").read_text())
    assert drifted["action_delay"]["steps"] == 6  # the drift, measured through the link
    assert drifted["actuator_gain"]["upper_bound"] > 1.3 * calibration["actuator_gain"]["upper_bound"]
    assert "action delay of 6 control steps" in report  # the startup check's refusal, in the report
