"""The shipped policy package (models/default): it reaches its goals without leaning on the safety filter.

Policies trained far past the 95% point take larger steps (the sparse reward pays for arriving sooner) and meet
the workspace barrier near the box faces; `make model` stops at 95% so that the shipped one does not. This test
keeps it that way: seeded sim episodes behind the sim calibration's limits, no intervention, no safe stop.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from deploy.export.rollouts import make_env
from deploy.finetune.gate import closed_loop_eval
from deploy.robot_spec import load_robot_spec
from deploy.runtime.package import load_package
from deploy.runtime.safety import SafetyLimits

PACKAGE = Path(__file__).resolve().parents[2] / "models" / "default"
SEEDS = range(10_000, 10_100)  # the export's 100 closed-loop seeds
MIN_SUCCESS = 0.95
MAX_INTERVENTIONS_PER_EPISODE = 1.0


@pytest.mark.skipif(not (PACKAGE / "manifest.json").is_file(), reason="models/default (a policy package) is absent")
def test_shipped_policy_succeeds_with_few_safety_interventions():
    package = load_package(PACKAGE)
    low, high = package.action_delay_steps
    assert low == high, f"the shipped package should be trained on one delay, got {package.action_delay_steps}"
    env = make_env("DelayedFetchReach-v0", {"delay": low})
    limits = SafetyLimits.from_spec(load_robot_spec(), package.contract)
    result = closed_loop_eval(package.make_backend("ort-cpu", "fp32"), env, package.contract, SEEDS, limits)
    assert result.error == ""
    assert result.success_rate >= MIN_SUCCESS, result
    # The box's floor is the table top (z 0.42 m, calibration/sim_fetch.yaml): goals a few cm above it bring the
    # barrier in on the way down (measured 0.49 per episode, all on such goals), and goals below it are skipped
    assert result.interventions_per_episode <= MAX_INTERVENTIONS_PER_EPISODE and result.safe_stops == 0, result
