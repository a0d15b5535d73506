"""The promotion gate: the arithmetic of checks (a), (b), (c), and closed-loop runs of real packages."""

from __future__ import annotations

import shutil
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest

import envs  # noqa: F401  (registers PointReach-v0)
from deploy.finetune.gate import ClosedLoopResult, GateConfig, closed_loop_eval, decide, run_gate
from deploy.finetune.promote import PackageStore, promote_if_passed
from deploy.runtime.package import load_package
from deploy.runtime.safety import SafetyLimits

LIMITS = SafetyLimits(
    workspace_low=(-0.25, -0.25, -0.25),
    workspace_high=(0.25, 0.25, 0.25),
    max_action=1.0,
    max_action_rate=2.0,
    barrier_fraction=0.5,
    action_scale_m=0.05,
)


def result(success: float, interventions: float = 0.0, stops: int = 0) -> ClosedLoopResult:
    return ClosedLoopResult(success, interventions, stops, 100)


def test_decide_arithmetic() -> None:
    config = GateConfig(original_margin=0.05, current_tolerance=0.0, max_extra_interventions=0.5)
    running = {"original": result(0.96, 1.0), "current": result(0.60, 2.0)}
    # (a) 0.92 >= 0.96 - 0.05 = 0.91; (b) 0.90 >= 0.60; (c) 1.0 + 2.5 = 3.5 <= 3.0 + 0.5 -> pass.
    ok = decide(running, {"original": result(0.92, 1.0), "current": result(0.90, 2.5)}, config)
    assert ok.passed and ok.reasons == []
    # (a) 0.90 < 0.91 fails; (b) 0.59 < 0.60 fails; (c) 1.0 + 2.6 = 3.6 > 3.5 fails.
    bad = decide(running, {"original": result(0.90, 1.0), "current": result(0.59, 2.6)}, config)
    assert not bad.passed
    assert [r[:3] for r in bad.reasons] == ["(a)", "(b)", "(c)"]
    stops = decide(running, {"original": result(0.96, 1.0), "current": result(0.60, 2.0, stops=1)}, config)
    assert stops.reasons == ["(c) 1 safe stops > running 0"]
    crashed = {t: ClosedLoopResult(0.0, float("inf"), 0, 0, error="the policy raised") for t in ("original", "current")}
    assert "failed to run" in decide(running, crashed, config).reasons[0]
    with pytest.raises(ValueError, match="lack the tasks"):
        decide({"original": result(1.0)}, running, config)


@pytest.fixture(scope="module")
def sim_envs(point_kwargs):
    made = {"original": gym.make("PointReach-v0", **point_kwargs), "current": gym.make("PointReach-v0", delay=1)}
    yield made
    for env in made.values():
        env.close()


def test_broken_candidate_is_not_promoted(tmp_path: Path, packages: dict[str, Path], sim_envs) -> None:
    store = PackageStore(tmp_path / "store")
    promote_if_passed(store, packages["good"], "v1", {"passed": True})
    config = GateConfig(n_episodes=20)
    report = run_gate(load_package(packages["broken"]), store.load_current(), sim_envs, LIMITS, config)
    assert not report.passed
    assert report.running["original"].success_rate >= 0.9
    assert report.candidate["original"].success_rate == 0.0
    # Driving at full speed into a wall: the workspace barrier intervenes, the P-controller never needs it.
    assert report.candidate["current"].interventions_per_episode > report.running["current"].interventions_per_episode
    assert {r[:3] for r in report.reasons} == {"(a)", "(b)", "(c)"}
    assert not promote_if_passed(store, packages["broken"], "v2", report.to_dict())
    assert store.current_name() == "v1"


def test_equivalent_candidate_passes(packages: dict[str, Path], sim_envs) -> None:
    report = run_gate(
        load_package(packages["good2"]), load_package(packages["good"]), sim_envs, LIMITS, GateConfig(n_episodes=20)
    )
    assert report.passed, report.reasons
    assert report.candidate["current"].success_rate >= 0.9


def test_unloadable_candidate_fails(tmp_path: Path, packages: dict[str, Path], sim_envs) -> None:
    # A package that verified at load but whose model is corrupted afterwards cannot be run: it fails the gate.
    copy = tmp_path / "tampered"
    shutil.copytree(packages["good2"], copy)
    candidate = load_package(copy)
    (copy / "policy.onnx").write_bytes(b"not a model")
    report = run_gate(candidate, load_package(packages["good"]), sim_envs, LIMITS, GateConfig(n_episodes=5))
    assert not report.passed and "cannot load the model" in report.reasons[0]


@pytest.mark.parametrize("limits", [None, LIMITS])
def test_closed_loop_eval_holds_and_counts_nan_actions(sim_envs, limits) -> None:
    contract = sim_envs["original"].unwrapped.contract

    def act(obs: np.ndarray) -> np.ndarray:
        return np.full((1, contract.action_dim), np.nan, dtype=np.float32)

    out = closed_loop_eval(act, sim_envs["original"], contract, [0, 1], limits=limits)
    assert out.success_rate == 0.0 and out.interventions_per_episode == 50


def test_goals_outside_the_workspace_are_skipped_for_both_policies(sim_envs) -> None:
    env = sim_envs["original"]
    contract = env.unwrapped.contract
    seeds = list(range(20))
    goals = np.stack([env.reset(seed=s)[0]["desired_goal"] for s in seeds])
    # A box whose x-floor sits at the median goal: about half the seeded goals fall outside it.
    floor = float(np.median(goals[:, 0]))
    box = SafetyLimits(
        workspace_low=(floor, -0.25, -0.25),
        workspace_high=(0.25, 0.25, 0.25),
        max_action=1.0,
        max_action_rate=2.0,
        barrier_fraction=0.5,
        action_scale_m=0.05,
    )
    outside = int(np.sum(goals[:, 0] < floor))

    def hold(obs: np.ndarray) -> np.ndarray:
        return np.zeros((1, contract.action_dim), dtype=np.float32)

    out = closed_loop_eval(hold, env, contract, seeds, limits=box)
    assert out.skipped_goals == outside > 0
    assert out.n_episodes == len(seeds) - outside
    everything = closed_loop_eval(hold, env, contract, seeds, limits=None)
    assert everything.skipped_goals == 0 and everything.n_episodes == len(seeds)
