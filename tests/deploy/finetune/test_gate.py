"""The promotion gate: the arithmetic of checks (a), (b), (c), and closed-loop runs of real packages."""

from __future__ import annotations

import shutil
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest

import envs  # noqa: F401  (registers PointReach-v0)
from deploy.finetune.gate import MIN_GATE_EPISODES, ClosedLoopResult, GateConfig, closed_loop_eval, decide, run_gate
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


def result(
    success: float, interventions: float = 0.0, stops: int = 0, n: int = 100, skipped: int = 0
) -> ClosedLoopResult:
    return ClosedLoopResult(success, interventions, stops, n, skipped_goals=skipped)


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
    report = run_gate(candidate, load_package(packages["good"]), sim_envs, LIMITS, GateConfig(n_episodes=10))
    assert not report.passed and "cannot load the model" in report.reasons[0]


@pytest.mark.parametrize("limits", [None, LIMITS])
def test_closed_loop_eval_holds_and_counts_nan_actions(sim_envs, limits) -> None:
    contract = sim_envs["original"].unwrapped.contract

    def act(obs: np.ndarray) -> np.ndarray:
        return np.full((1, contract.action_dim), np.nan, dtype=np.float32)

    out = closed_loop_eval(act, sim_envs["original"], contract, [0, 1], limits=limits, hold_non_finite=True)
    assert out.error == ""
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


def test_gate_config_refuses_too_few_episodes() -> None:
    for n in (1, MIN_GATE_EPISODES - 1):
        with pytest.raises(ValueError, match=f"n_episodes must be >= {MIN_GATE_EPISODES}, got {n}"):
            GateConfig(n_episodes=n)
    for fraction in (0.0, 1.5):
        with pytest.raises(ValueError, match="min_evaluated_fraction must be in"):
            GateConfig(min_evaluated_fraction=fraction)
    assert GateConfig().min_evaluated() == 80  # ceil(0.8 * 100)
    assert GateConfig(n_episodes=10).min_evaluated() == 10  # ceil(0.8 * 10) = 8, raised to the floor of 10
    assert GateConfig(n_episodes=30, min_evaluated_fraction=0.7).min_evaluated() == 21  # 0.7 * 30 = 21.000...004


def test_decide_refuses_a_verdict_on_too_few_evaluated_episodes() -> None:
    config = GateConfig()  # 100 seeded episodes, >= 80 must be evaluated
    # A small box skipped 99 goals: the candidate's 1/1 against the running 0/1 would pass every check.
    running = {t: result(0.0, n=1, skipped=99) for t in ("original", "current")}
    candidate = {t: result(1.0, n=1, skipped=99) for t in ("original", "current")}
    report = decide(running, candidate, config)
    assert not report.passed and len(report.reasons) == 2
    assert "only 1 of 100 seeded episodes were evaluated (99 skipped" in report.reasons[0]
    assert "needs >= 80" in report.reasons[0]
    assert "enlarge the workspace box" in report.reasons[0] and "raise n_episodes" in report.reasons[0]
    # 80 evaluated + 20 skipped is enough; 79 + 21 is not (on one task: one reason, naming the task).
    enough = {t: result(0.9, n=80, skipped=20) for t in ("original", "current")}
    assert decide(enough, enough, config).passed
    short = {"original": result(0.9, n=79, skipped=21), "current": result(0.9, n=80, skipped=20)}
    reasons = decide(short, short, config).reasons
    assert len(reasons) == 1 and reasons[0].startswith("(episodes) on original only 79 of 100")


def test_decide_refuses_results_of_different_episodes() -> None:
    config = GateConfig()
    running = {t: result(0.9) for t in ("original", "current")}
    fewer = {"original": result(0.9, n=90, skipped=10), "current": result(0.9)}
    reasons = decide(running, fewer, config).reasons
    assert len(reasons) == 1 and "not evaluated on the same episodes" in reasons[0]
    assert "running: 100 evaluated, 0 skipped; candidate: 90 evaluated, 10 skipped" in reasons[0]
    # Both measured on 20 seeds while the config asks for 100: refused, not decided on 20.
    short = {t: result(0.9, n=20) for t in ("original", "current")}
    assert "the config asks for n_episodes=100" in decide(short, short, config).reasons[0]


def test_decide_refuses_a_failed_running_policy() -> None:
    running = {"original": result(0.9), "current": ClosedLoopResult(0.0, float("inf"), 0, 100, error="it raised")}
    report = decide(running, {t: result(0.9) for t in ("original", "current")}, GateConfig())
    assert report.reasons == [
        "the running policy failed to run on current: it raised; the gate cannot compare against it"
    ]


class StubPackage:
    """What ``run_gate`` uses of a package: the contract and a backend (a Python P-controller, optionally with NaN)."""

    def __init__(self, contract, nan_calls: frozenset[int] = frozenset(), far_m: float | None = None) -> None:
        self.contract, self.nan_calls, self.far_m, self.calls = contract, nan_calls, far_m, 0

    def make_backend(self, backend: str, variant: str):
        def act(obs: np.ndarray) -> np.ndarray:
            self.calls += 1
            error = obs[:, -3:] - obs[:, -6:-3]
            action = np.clip(0.5 * error / 0.05, -1.0, 1.0)
            if self.far_m is not None and np.linalg.norm(error) > self.far_m:
                action = -np.ones_like(action)  # drives away from any goal farther than far_m
            if self.calls in self.nan_calls:
                action = np.full_like(action, np.nan)
            return action.astype(np.float32)

        return act


def test_a_box_that_skips_most_goals_fails_the_gate(sim_envs) -> None:
    contract = sim_envs["original"].unwrapped.contract
    config = GateConfig()
    goals = np.stack([sim_envs["original"].reset(seed=config.seed + i)[0]["desired_goal"] for i in range(100)])
    half = float(np.sort(np.abs(goals).max(axis=1))[0]) + 1e-4  # a box holding exactly one seeded goal
    box = SafetyLimits(workspace_low=(-half,) * 3, workspace_high=(half,) * 3, max_action_rate=2.0)
    # The candidate fails almost every goal (it drives away beyond 4 cm) but succeeds on the one near goal.
    candidate, running = StubPackage(contract, far_m=0.04), StubPackage(contract)
    report = run_gate(candidate, running, sim_envs, box, config)
    assert report.candidate["original"].n_episodes == 1 and report.candidate["original"].skipped_goals == 99
    assert not report.passed
    assert len(report.reasons) == 2
    for task, reason in zip(("original", "current"), report.reasons, strict=True):
        assert reason.startswith(f"(episodes) on {task} only 1 of 100 seeded episodes were evaluated (99 skipped")


def test_a_candidate_returning_nan_once_fails_the_gate(sim_envs) -> None:
    contract = sim_envs["original"].unwrapped.contract
    config = GateConfig(n_episodes=10, max_extra_interventions=2.0)  # would absorb one held NaN per episode
    candidate = StubPackage(contract, nan_calls=frozenset({4}))  # tick 3 of the first episode
    report = run_gate(candidate, StubPackage(contract), sim_envs, LIMITS, config)
    assert not report.passed
    error = report.candidate["original"].error
    assert error.startswith("the policy returned a non-finite action [nan, nan, nan] (episode seed 50000, tick 3)")
    assert report.reasons[0] == f"candidate failed to run on original: {error}"
    # The running policy is measured as the robot runs it: its NaN is held and counted, not an error.
    nan_running = StubPackage(contract, nan_calls=frozenset({4}))
    held = run_gate(StubPackage(contract), nan_running, sim_envs, LIMITS, config)
    assert held.running["original"].error == "" and held.running["original"].interventions_per_episode > 0
    assert held.passed, held.reasons
