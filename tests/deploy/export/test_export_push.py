"""The exporter checks a push package closed-loop like a reach package: on the push cell's env, with the contract
that carries the block (format 2), refused on a robot that reports no block."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from deploy.contract import BLOCK_CONTRACT_FORMAT_VERSION, fetch_push_contract
from deploy.export.exporter import ExportConfig, export_package
from deploy.robot_spec import DEFAULT_SIM_SPEC, load_robot_spec
from deploy.runtime.compatibility import BLOCK_TRACKER_MISSING, CompatibilityError, check_compatibility
from deploy.runtime.package import load_package

SMALL = {"allow_small_checks": True, "n_parity_obs": 300, "n_calibration_obs": 600, "n_episodes": 5}
SMALL_RUN = {"latency_calls": 50, "strict": False}  # an untrained policy: int8 may miss its tolerance


def test_a_push_policy_exports_with_the_block_in_its_contract_and_a_closed_loop_check(tmp_path: Path) -> None:
    import envs  # noqa: F401  (registers the ids)
    from robot_grpo.grpo import GRPO

    model = GRPO("MultiInputPolicy", "DelayedFetchPush-v0", policy_kwargs={"net_arch": [16]}, seed=0)
    package = export_package(
        model, tmp_path / "push", "DelayedFetchPushRobot-v0", config=ExportConfig(**SMALL, **SMALL_RUN)
    )
    report = json.loads((package / "report.json").read_text())
    assert report["env_id"] == "DelayedFetchPushRobot-v0"
    assert len(report["episode_seeds"]) == SMALL["n_episodes"]
    assert set(report["variants"]) >= {"fp32", "fp16", "int8"}
    assert report["variants"]["fp32"]["success_rate"] == report["torch"]["success_rate"]  # same seeds, same actions
    manifest = json.loads((package / "manifest.json").read_text())
    assert manifest["contract"]["format_version"] == BLOCK_CONTRACT_FORMAT_VERSION
    assert manifest["trained_for"]["robot_id"] == "sim_fetch_push"
    loaded = load_package(package, allow_failed_checks=True)
    assert loaded.contract == fetch_push_contract(2)
    with pytest.raises(CompatibilityError, match=BLOCK_TRACKER_MISSING):
        check_compatibility(load_robot_spec(DEFAULT_SIM_SPEC), loaded.contract, loaded.action_delay_steps, "push")
