"""The promotion gate: a candidate package replaces the running one only if it is no worse where it matters.

Both packages run the same seeded closed-loop episodes through their exported ONNX model (the bytes the
robot would load, via ``PolicyPackage.make_backend``) and the robot's safety filter, on two simulated tasks:

- ``original``: the sim task the policy was trained on;
- ``current``: the simulated robot configured like the robot is now (e.g. its measured delay and gain).

The candidate passes when, with ``config`` margins (success rates are fractions in [0, 1]):

(a) ``candidate.original >= running.original - original_margin``   (it keeps what sim taught);
(b) ``candidate.current  >= running.current  - current_tolerance``   (it improves or holds on the robot's condition);
(c) ``candidate.interventions <= running.interventions + max_extra_interventions`` per episode, summed over both
    tasks (no more safety-filter interventions), and no safe stop the running policy did not also cause.

A candidate whose model raises, returns NaN/inf (even once) or a wrong shape fails with that reason. The running
policy is measured as the robot runs it: the safety filter holds a non-finite action and counts an intervention.

Targets outside the robot's workspace box are not tasks the robot is given (the runtime's ``GoalSource`` refuses
them, and the barrier would hold the arm short of them): with safety limits, seeded episodes whose goal lies
outside the box are skipped, the same ones for both policies, and counted in ``skipped_goals``. The checks run
only when, on each task, both policies were evaluated on the same episodes, every seeded episode was either
evaluated or skipped, and at least ``GateConfig.min_evaluated()`` were evaluated: a verdict on the few goals a
small box leaves is not a verdict on the task.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import gymnasium as gym
import numpy as np

from deploy.contract import ObservationContract, in_flight_displacement_m
from deploy.runtime.package import PolicyPackage
from deploy.runtime.safety import SafetyLimits, filter_action

ActFn = Callable[[np.ndarray], np.ndarray]
TASKS = ("original", "current")
FRESH_STATE_AGE_S = 0.0  # the sim hands the filter a fresh state every tick
# The fewest seeded episodes the gate runs, and the fewest it decides on after skips: below 10, one episode moves a
# success rate by more than 0.1, twice the default original_margin, so a single lucky goal decides the verdict.
# The launch schema's ``gate_episodes`` has the same floor.
MIN_GATE_EPISODES = 10


@dataclass(frozen=True)
class GateConfig:
    """Margins and sizes of the gate.

    :param n_episodes: seeded episodes per task and policy (the same seeds for both policies).
    :param seed: first episode seed.
    :param original_margin: allowed drop of success on the original task (fraction, e.g. 0.05 = 5 points).
    :param current_tolerance: allowed drop on the current condition (0: must improve or hold).
    :param max_extra_interventions: allowed increase of safety interventions per episode (summed over tasks).
    :param min_evaluated_fraction: fraction (0, 1] of ``n_episodes`` that must be evaluated, not skipped for a goal
        outside the workspace box, on each task (and never fewer than ``MIN_GATE_EPISODES``). The default 0.8: a
        box that excludes more than a fifth of the task's goals leaves a corner of the task, not the task, and 80
        of 100 episodes keep the standard error of a 0.9 success rate near 0.03, under the 0.05 margin.
    """

    n_episodes: int = 100
    seed: int = 50_000
    original_margin: float = 0.05
    current_tolerance: float = 0.0
    max_extra_interventions: float = 0.0
    min_evaluated_fraction: float = 0.8

    def __post_init__(self) -> None:
        if self.n_episodes < MIN_GATE_EPISODES:
            raise ValueError(
                f"n_episodes must be >= {MIN_GATE_EPISODES}, got {self.n_episodes}: with fewer, one episode moves a "
                f"success rate by more than 0.1 and a lucky goal decides the gate; use 100 (the default) or more"
            )
        for name in ("original_margin", "current_tolerance", "max_extra_interventions"):
            if not getattr(self, name) >= 0:
                raise ValueError(f"{name} must be >= 0, got {getattr(self, name)}")
        if not 0 < self.min_evaluated_fraction <= 1:
            raise ValueError(
                f"min_evaluated_fraction must be in (0, 1], got {self.min_evaluated_fraction}; 0.8 is the default"
            )

    def min_evaluated(self) -> int:
        """Episodes that must be evaluated (after skips) per task and policy: ``ceil(fraction * n_episodes)``, at
        least ``MIN_GATE_EPISODES``."""
        return max(MIN_GATE_EPISODES, math.ceil(round(self.min_evaluated_fraction * self.n_episodes, 9)))


@dataclass(frozen=True)
class ClosedLoopResult:
    """Closed-loop outcome of one policy on one task."""

    success_rate: float
    interventions_per_episode: float
    safe_stops: int
    n_episodes: int
    error: str = ""  # the policy failed to run (raised, NaN, wrong shape)
    skipped_goals: int = 0  # seeded episodes whose goal lies outside the workspace box (not evaluated)


@dataclass
class GateReport:
    """The gate's verdict: ``passed`` and, when not, every failed check in ``reasons``."""

    passed: bool
    reasons: list[str]
    running: dict[str, ClosedLoopResult]
    candidate: dict[str, ClosedLoopResult]
    config: GateConfig = field(default_factory=GateConfig)

    def to_dict(self) -> dict[str, Any]:
        return {
            "passed": self.passed,
            "reasons": list(self.reasons),
            "running": {k: asdict(v) for k, v in self.running.items()},
            "candidate": {k: asdict(v) for k, v in self.candidate.items()},
            "config": asdict(self.config),
        }


def sim_in_flight_m(env: gym.Env, contract: ObservationContract, dims: int) -> np.ndarray:
    """Summed displacement (metres) of the commands in the simulated robot's delay line (all still in flight), as a
    robot reports its line: the env's last ``delay`` commands, which may be more than the policy's history shows."""
    sim = env.unwrapped
    line = sim.history.get_state()
    delay = int(sim.delay)
    return in_flight_displacement_m(line[len(line) - delay :] if delay else line[:0], contract.action_scale_m, dims)


def closed_loop_eval(
    act: ActFn,
    env: gym.Env,
    contract: ObservationContract,
    seeds: Sequence[int],
    limits: SafetyLimits | None,
    hold_non_finite: bool = False,
) -> ClosedLoopResult:
    """Run one episode per seed with ``act`` behind the safety filter; success is ``is_success`` at the end.

    :param hold_non_finite: False (a candidate): the first NaN/inf action ends the evaluation with ``error`` set.
        True (the running policy, as the robot runs it): the action is replaced by the hold command and counted as
        an intervention; without ``limits`` this is the only intervention counted.
    """
    successes, interventions, stops, skipped = 0, 0, 0, 0
    position = slice(*contract.position_slice)
    for seed in seeds:
        obs, _ = env.reset(seed=int(seed))
        if limits is not None and not _inside(obs["desired_goal"], limits):
            skipped += 1
            continue
        previous = contract.hold()
        done, info, tick = False, {}, 0
        while not done:
            flat = contract.flatten(obs)[None]
            try:
                out = np.asarray(act(flat), dtype=np.float64)
            except Exception as err:  # a broken candidate must fail the gate, not crash the fine-tuner
                return ClosedLoopResult(0.0, float("inf"), 0, len(seeds), error=f"the policy raised {err!r}")
            if out.shape != (1, contract.action_dim):
                return ClosedLoopResult(
                    0.0,
                    float("inf"),
                    0,
                    len(seeds),
                    error=f"action shape {out.shape}, expected (1, {contract.action_dim})",
                )
            proposed = out[0]
            if not hold_non_finite and not np.all(np.isfinite(proposed)):
                return ClosedLoopResult(
                    0.0,
                    float("inf"),
                    0,
                    len(seeds),
                    error=f"the policy returned a non-finite action {proposed.tolist()} (episode seed {seed}, "
                    f"tick {tick}); a deployable policy outputs finite actions: check its weights and normalizer",
                )
            if limits is not None:
                state = obs["observation"]
                result = filter_action(
                    state[position],
                    sim_in_flight_m(env, contract, limits.position_dims),
                    proposed,
                    previous,
                    FRESH_STATE_AGE_S,
                    limits,
                )
                action, intervened, stop = result.action, bool(result.reasons), result.stop
            else:
                finite = bool(np.all(np.isfinite(proposed)))
                action, intervened, stop = (proposed if finite else contract.hold()), not finite, False
            interventions += intervened
            if stop:
                stops += 1
                info = {"is_success": False}
                break
            obs, _, terminated, truncated, info = env.step(contract.clip_action(action))
            previous = action
            done = terminated or truncated
            tick += 1
        successes += bool(info.get("is_success", False))
    n = len(seeds) - skipped
    if n == 0:
        return ClosedLoopResult(
            0.0, 0.0, 0, 0, error="every seeded goal lies outside the workspace box", skipped_goals=skipped
        )
    return ClosedLoopResult(successes / n, interventions / n, stops, n, skipped_goals=skipped)


def _inside(goal: np.ndarray, limits: SafetyLimits) -> bool:
    dims = limits.position_dims
    low, high = np.asarray(limits.workspace_low), np.asarray(limits.workspace_high)
    return bool(np.all(goal[:dims] >= low) and np.all(goal[:dims] <= high))


def decide(
    running: Mapping[str, ClosedLoopResult], candidate: Mapping[str, ClosedLoopResult], config: GateConfig
) -> GateReport:
    """Check that both policies ran on enough of the same episodes, then apply checks (a), (b), (c) of the module
    docstring to measured results (pure). Each stage runs only when the one before found nothing."""
    for name, results in (("running", running), ("candidate", candidate)):
        missing = [t for t in TASKS if t not in results]
        if missing:
            raise ValueError(f"{name} results lack the tasks {missing}; the gate needs {TASKS}")
    reasons = [
        f"the running policy failed to run on {t}: {running[t].error}; the gate cannot compare against it"
        for t in TASKS
        if running[t].error
    ]
    reasons += [f"candidate failed to run on {t}: {candidate[t].error}" for t in TASKS if candidate[t].error]
    if not reasons:
        reasons = _episode_count_reasons(running, candidate, config)
    if not reasons:
        reasons = _margin_reasons(running, candidate, config)
    return GateReport(not reasons, reasons, dict(running), dict(candidate), config)


def _episode_count_reasons(
    running: Mapping[str, ClosedLoopResult], candidate: Mapping[str, ClosedLoopResult], config: GateConfig
) -> list[str]:
    """Both policies evaluated on the same episodes, all of ``config``'s seeds run, enough of them not skipped."""
    need, reasons = config.min_evaluated(), []
    for t in TASKS:
        run, cand = running[t], candidate[t]
        if (run.n_episodes, run.skipped_goals) != (cand.n_episodes, cand.skipped_goals):
            reasons.append(
                f"(episodes) on {t} the policies were not evaluated on the same episodes (running: {run.n_episodes} "
                f"evaluated, {run.skipped_goals} skipped; candidate: {cand.n_episodes} evaluated, "
                f"{cand.skipped_goals} skipped): measure both with the same seeds and limits, as run_gate does"
            )
        elif run.n_episodes + run.skipped_goals != config.n_episodes:
            reasons.append(
                f"(episodes) on {t} {run.n_episodes + run.skipped_goals} seeded episodes were run (evaluated + "
                f"skipped), the config asks for n_episodes={config.n_episodes}: measure with the config's seeds"
            )
        elif run.n_episodes < need:
            reasons.append(
                f"(episodes) on {t} only {run.n_episodes} of {config.n_episodes} seeded episodes were evaluated "
                f"({run.skipped_goals} skipped: their goal lies outside the workspace box); the gate needs >= {need} "
                f"(min_evaluated_fraction {config.min_evaluated_fraction} of n_episodes, at least "
                f"{MIN_GATE_EPISODES}): enlarge the workspace box or give the task goals inside it, or raise n_episodes"
            )
    return reasons


def _margin_reasons(
    running: Mapping[str, ClosedLoopResult], candidate: Mapping[str, ClosedLoopResult], config: GateConfig
) -> list[str]:
    """Checks (a), (b), (c) of the module docstring."""
    reasons = []
    run_o, cand_o = running["original"].success_rate, candidate["original"].success_rate
    if cand_o < run_o - config.original_margin:
        reasons.append(
            f"(a) original-task success {cand_o:.3f} < running {run_o:.3f} - margin {config.original_margin}"
        )
    run_c, cand_c = running["current"].success_rate, candidate["current"].success_rate
    if cand_c < run_c - config.current_tolerance:
        reasons.append(
            f"(b) current-condition success {cand_c:.3f} < running {run_c:.3f} - tolerance {config.current_tolerance}"
        )
    run_i = sum(running[t].interventions_per_episode for t in TASKS)
    cand_i = sum(candidate[t].interventions_per_episode for t in TASKS)
    if cand_i > run_i + config.max_extra_interventions:
        reasons.append(
            f"(c) {cand_i:.2f} safety interventions per episode > running {run_i:.2f} "
            f"+ {config.max_extra_interventions}"
        )
    run_s = sum(running[t].safe_stops for t in TASKS)
    cand_s = sum(candidate[t].safe_stops for t in TASKS)
    if cand_s > run_s:
        reasons.append(f"(c) {cand_s} safe stops > running {run_s}")
    return reasons


def run_gate(
    candidate: PolicyPackage,
    running: PolicyPackage,
    envs: Mapping[str, gym.Env],
    limits: SafetyLimits | None,
    config: GateConfig | None = None,
    backend: str = "ort-cpu",
    variant: str = "fp32",
) -> GateReport:
    """Measure both packages on ``envs["original"]`` and ``envs["current"]`` and decide (see the module docstring).

    :param candidate: the fine-tuned package (already exported and verified by ``load_package``).
    :param running: the package the robot runs now.
    :param envs: the two simulated tasks.
    :param limits: the robot's safety limits (``SafetyLimits.from_spec``); None counts only NaN holds.
    :param backend: inference backend for both packages (the robot's).
    :param variant: model variant for both packages (the robot's).
    """
    config = config or GateConfig()
    if candidate.contract != running.contract:
        raise ValueError(
            "the candidate's observation contract differs from the running package's; a fine-tuned policy must keep "
            f"the contract (candidate {candidate.contract.to_dict()}, running {running.contract.to_dict()})"
        )
    seeds = [config.seed + i for i in range(config.n_episodes)]
    results: dict[str, dict[str, ClosedLoopResult]] = {"running": {}, "candidate": {}}
    for name, package in (("running", running), ("candidate", candidate)):
        try:
            act = package.make_backend(backend, variant)
        except Exception as err:  # an unloadable candidate fails the gate with the reason
            failed = ClosedLoopResult(0.0, float("inf"), 0, 0, error=f"cannot load the model: {err!r}")
            results[name] = dict.fromkeys(TASKS, failed)
            continue
        for task in TASKS:
            results[name][task] = closed_loop_eval(
                act, envs[task], running.contract, seeds, limits, hold_non_finite=name == "running"
            )
    if any(r.error for r in results["running"].values()):
        raise RuntimeError(f"the running package does not run in simulation: {results['running']}")
    return decide(results["running"], results["candidate"], config)
