"""Continual fine-tuning benchmark: does EWC keep what sim taught while the policy adapts to the robot's drift?

1. Train GRPO on DelayedFetchReach with delay k=2 (the original task) until 95% success, or reuse a checkpoint.
2. Shift the condition: the simulated robot now has a longer delay and an actuation gain error (``--delay``,
   ``--gain``; the issue's example, delay 3 and gain 1.1, does not hurt the sim-trained policy, so the default is
   delay 6 and gain 1.5, the largest gain the env accepts). The runtime still builds the deployed contract's
   observation (history of 2 commands), as it would on the robot.
3. Production line: ``--targets`` fixed targets, each attempted ``--attempts`` times from the home pose by the
   deployed policy with exploration (actions sampled from its Gaussian), behind the safety filter; every tick
   goes through the runtime's tick log (``deploy.runtime.ticklog``) and is read back by the fine-tuner.
4. Fine-tune from those logs with each variant - plain (lambda = 0) and EWC with each ``--lambdas`` value - on
   the same data with the same budget (``--updates`` GRPO updates); with ``--rounds`` > 1 every variant then
   collects its own next round of logs with its current policy (online fine-tuning, same budget per round).
5. Report deterministic closed-loop success (through the safety filter, as in the gate) on the new condition
   (random goals, and the line's targets) and on the original task, before and after.

Writes benchmarks/results/continual.json and .md, with peak memory (ru_maxrss).

    .venv/bin/python benchmarks/continual.py                       # the main table (about 9 minutes here)
    .venv/bin/python benchmarks/continual.py --delay 3 --gain 1.1 --rounds 2 --lambdas 30 --gammas 0.9 \
        --out runs/continual/continual_issue_example              # the issue's example drift
"""

from __future__ import annotations

import argparse
import copy
import json
import platform
import resource
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import torch as th

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a checkout without installing

from deploy.contract import ObservationContract, fetch_reach_contract
from deploy.finetune.dataset import DEFAULT_TRAINED_ACTION, TRAINED_ACTIONS, load_log_dataset
from deploy.finetune.gate import TASKS, ClosedLoopResult, GateConfig, closed_loop_eval, decide, sim_in_flight_m
from deploy.finetune.round import RoundConfig, finetune_from_dataset, sim_fisher_anchor
from deploy.robot_spec import load_robot_spec
from deploy.runtime.exploration import DEFAULT_STD_SCALE
from deploy.runtime.safety import SafetyLimits, filter_action
from deploy.runtime.tick_record import NO_EPISODE, TickRecord
from deploy.runtime.ticklog import TickLogWriter
from envs.delayed_fetch_reach import DelayedFetchReachEnv
from robot_grpo.ewc import DEFAULT_EWC_GAMMA, DEFAULT_EWC_LAMBDA
from robot_grpo.grpo import DEFAULT_N_ENVS, GRPO

RESULTS = Path(__file__).resolve().parent / "results"
ORIGINAL_DELAY = 2
ENV_ID = "DelayedFetchReach-v0"
BASE_TARGET_SUCCESS = 0.95  # the sim training stops at its first evaluation at or above this
BASE_EVAL_EPISODES = 30
FRESH_STATE_AGE_S = 0.0
EVAL_SEED = 50_000  # random-goal evaluation episodes
LINE_SEED = 70_000  # the production line's targets: the goal of reset(seed=LINE_SEED + i)
FISHER_SEED = 90_000
GATE_SEED = 60_000  # the gate's episodes (--gate): not the evaluation's, so a promotion is not scored where chosen
TARGET_NEW = 0.9  # success on the new condition
TARGET_KEPT = 0.95  # share of the original success kept
TARGET_INTERVENTIONS = 0.1  # safety-filter interventions per episode (new + original)
TARGET_ROUNDS = 3  # rounds within which the targets must be met


def shifted_env(delay: int, gain: float) -> DelayedFetchReachEnv:
    """The robot after a drift: delay ``delay`` and actuator gain ``gain``; the observation keeps the deployed
    contract's history of 2 commands (the runtime builds it from the package's contract), so the oldest commands
    in flight are invisible to the policy."""
    return DelayedFetchReachEnv(delay=delay, history_len=ORIGINAL_DELAY, action_gain=gain)


# Policies and evaluation ------------------------------------------------------------------------------------
def make_model(seed: int, train_steps: int, checkpoint: Path) -> tuple[GRPO, float]:
    """The sim-trained policy (original task, k=2): loaded from ``checkpoint`` or trained and saved there.

    Trained like ``robot-grpo train`` does by default: it stops at the first evaluation with >= 95% success
    (30 fixed episodes) or at ``train_steps``. Trained on far past that point, GRPO's policies take larger steps
    (the sparse reward pays for arriving sooner) and lean on the safety filter's barrier near the workspace faces.
    """
    from stable_baselines3.common.env_util import make_vec_env

    from launch.training import SuccessEvalCallback

    original = {"delay": ORIGINAL_DELAY}
    if checkpoint.is_file():
        model = GRPO.load(str(checkpoint), device="cpu")
        n_envs = model.group_size * model.n_groups  # the checkpoint's own, which may predate today's defaults
        model.set_env(make_vec_env(DelayedFetchReachEnv, n_envs=n_envs, seed=seed, env_kwargs=original))
        return model, 0.0
    env = make_vec_env(DelayedFetchReachEnv, n_envs=DEFAULT_N_ENVS, seed=seed, env_kwargs=original)
    start = time.perf_counter()
    model = GRPO("MultiInputPolicy", env, seed=seed, n_steps=50)
    stop_at_target = SuccessEvalCallback(ENV_ID, original, BASE_EVAL_EPISODES, BASE_TARGET_SUCCESS)
    model.learn(train_steps, callback=stop_at_target)
    checkpoint.parent.mkdir(parents=True, exist_ok=True)
    model.save(str(checkpoint))
    return model, time.perf_counter() - start


def act_fn(model: GRPO):
    """Deterministic exported action (normalizer, mean, clip) on flat float32 observations."""
    module = copy.deepcopy(model.policy.make_export_module()).eval()

    def act(flat: np.ndarray) -> np.ndarray:
        with th.no_grad():
            return module(th.as_tensor(flat)).numpy()

    return act


def evaluate(model: GRPO, envs: dict[str, Any], limits: SafetyLimits, n_episodes: int, n_targets: int) -> dict:
    contract = fetch_reach_contract(ORIGINAL_DELAY)
    act = act_fn(model)
    out = {}
    cases = {
        "original": (envs["original"], [EVAL_SEED + i for i in range(n_episodes)]),
        "new": (envs["shifted"], [EVAL_SEED + i for i in range(n_episodes)]),
        "new_line_targets": (envs["shifted"], [LINE_SEED + i for i in range(n_targets)]),
    }
    for name, (env, seeds) in cases.items():
        result = closed_loop_eval(act, env, contract, seeds, limits)
        out[name] = {"success": result.success_rate, "interventions_per_episode": result.interventions_per_episode}
    return out


def gate_results(
    model: GRPO, envs: dict[str, Any], limits: SafetyLimits, n_episodes: int
) -> dict[str, ClosedLoopResult]:
    """The gate's closed-loop results (``deploy.finetune.gate``'s tasks) on the ``GATE_SEED`` episodes."""
    contract = fetch_reach_contract(ORIGINAL_DELAY)
    act = act_fn(model)
    seeds = [GATE_SEED + i for i in range(n_episodes)]
    task_env = {"original": envs["original"], "current": envs["shifted"]}
    return {task: closed_loop_eval(act, task_env[task], contract, seeds, limits) for task in TASKS}


# The production line's logs ---------------------------------------------------------------------------------
def collect_logs(
    model: GRPO,
    env: DelayedFetchReachEnv,
    limits: SafetyLimits,
    path: Path,
    n_targets: int,
    attempts: int,
    seed: int,
    explore_scale: float = DEFAULT_STD_SCALE,
) -> dict[str, float]:
    """Run the line (each target ``attempts`` times, sampled actions, safety filter) and write the tick log.

    :param explore_scale: the line's noise std as a multiple of the policy's own std.
    """
    contract = env.contract
    policy = model.policy
    gen = th.Generator().manual_seed(seed)
    path.parent.mkdir(parents=True, exist_ok=True)
    if path.exists():
        path.unlink()
    tick, episode, successes, interventions = 0, 0, 0, 0
    with TickLogWriter(path, fsync_interval_s=None) as log:
        for target in range(n_targets):
            for _ in range(attempts):
                obs, _ = env.reset(seed=LINE_SEED + target)  # same home pose, same target
                previous = contract.hold()
                done, info = False, {}
                while not done:
                    flat = contract.flatten(obs)
                    with th.no_grad():
                        mean, log_std = policy.distribution_params(th.as_tensor(flat[None]))
                        noise = th.randn(mean.shape, generator=gen)
                        proposed = (mean + noise * explore_scale * log_std.exp()).numpy()[0].astype(np.float64)
                    state = obs["observation"][: contract.state_dim]
                    pending = sim_in_flight_m(env, contract, limits.position_dims)  # the whole delay line
                    result = filter_action(state[:3], pending, proposed, previous, FRESH_STATE_AGE_S, limits)
                    log.append(
                        TickRecord(
                            t_s=tick * contract.control_period_s,
                            tick=tick,
                            state=state,
                            obs_flat=flat,
                            goal=obs["desired_goal"],
                            proposed=proposed,
                            sent=result.action,
                            reasons=result.reasons,
                            latency_s=0.0,
                            jitter_s=0.0,
                            episode_id=episode,
                        )
                    )
                    interventions += bool(result.reasons)
                    obs, _, terminated, truncated, info = env.step(contract.clip_action(result.action))
                    previous = result.action
                    done = terminated or truncated
                    tick += 1
                # The tick after the last action: the runtime logs it before sending the robot home.
                last = log_last(obs, contract, tick)
                last.episode_id = episode
                log.append(last)
                log.append(
                    TickRecord(
                        tick * contract.control_period_s,
                        tick + 1,
                        obs["observation"][: contract.state_dim],
                        contract.flatten(obs),
                        obs["desired_goal"],
                        contract.hold(),
                        contract.hold(),
                        (),
                        0.0,
                        0.0,
                        NO_EPISODE,
                    )
                )
                tick += 2
                episode += 1
                successes += bool(info.get("is_success", False))
    return {"episodes": episode, "sampled_success": successes / episode, "interventions": interventions}


def log_last(obs: dict[str, np.ndarray], contract: ObservationContract, tick: int) -> TickRecord:
    """A hold tick (no action proposed) observing ``obs``."""
    return TickRecord(
        t_s=tick * contract.control_period_s,
        tick=tick,
        state=obs["observation"][: contract.state_dim],
        obs_flat=contract.flatten(obs),
        goal=obs["desired_goal"],
        proposed=contract.hold(),
        sent=contract.hold(),
        reasons=(),
        latency_s=0.0,
        jitter_s=0.0,
        episode_id=NO_EPISODE,
    )


# Main -------------------------------------------------------------------------------------------------------
def variants_of(args: argparse.Namespace) -> dict[str, tuple[float, float]]:
    """Variant name -> (lambda, gamma); plain fine-tuning is lambda 0."""
    variants: dict[str, tuple[float, float]] = {} if args.skip_plain else {"plain": (0.0, 0.0)}
    for lam in map(float, args.lambdas.split(",")):
        for gamma in map(float, args.gammas.split(",")):
            variants[f"ewc_lambda_{lam:g}_gamma_{gamma:g}"] = (lam, gamma)
    return variants


def run_seed(args: argparse.Namespace, seed: int) -> dict[str, Any]:
    """The whole experiment for one seed: base policy, round-0 logs, every variant's rounds."""
    checkpoint = Path(args.checkpoint.format(seed=seed))
    model, train_s = make_model(seed, args.train_steps, checkpoint)
    limits = SafetyLimits.from_spec(load_robot_spec(), fetch_reach_contract(ORIGINAL_DELAY))
    envs = {
        "original": DelayedFetchReachEnv(delay=ORIGINAL_DELAY),
        "shifted": shifted_env(args.delay, args.gain),
    }
    compute_reward = envs["original"].compute_reward
    before = evaluate(model, envs, limits, args.eval_episodes, args.targets)
    print(f"seed {seed} deployed policy: {before}", flush=True)
    anchor = sim_fisher_anchor(model, envs["original"], seed=FISHER_SEED)
    log_dir = Path("runs/continual/logs") / Path(args.out).name  # runs side by side keep their logs apart
    first_log = log_dir / f"seed{seed}_round0_shared.mcap"
    line_stats = collect_logs(
        model, envs["shifted"], limits, first_log, args.targets, args.attempts, seed, args.explore_scale
    )
    print(f"seed {seed} round 0 logs: {line_stats}", flush=True)
    contract = fetch_reach_contract(ORIGINAL_DELAY)
    hindsight = {"n_sampled_goal": args.n_sampled_goal} if args.n_sampled_goal else {}
    rows: dict[str, Any] = {}
    for name, (lam, gamma) in variants_of(args).items():
        t0 = time.perf_counter()
        tuned = GRPO.load(str(checkpoint), env=model.env, device="cpu")
        ewc = copy.deepcopy(anchor) if lam > 0 else None
        history = []
        if args.gate:  # what the robot runs: the line collects with it, a refused candidate is dropped
            running = gate_results(tuned, envs, limits, args.eval_episodes)
            running_weights = copy.deepcopy((tuned.policy.state_dict(), tuned.policy.optimizer.state_dict()))
        for rnd in range(args.rounds):
            log_path = first_log
            if rnd > 0:
                log_path = log_dir / f"seed{seed}_{name}_round{rnd}.mcap"
                collect_logs(
                    tuned,
                    envs["shifted"],
                    limits,
                    log_path,
                    args.targets,
                    args.attempts,
                    seed + rnd,
                    args.explore_scale,
                )
            dataset = load_log_dataset(log_path, contract, action=args.trained_action)
            config = RoundConfig(
                group_size=args.attempts,
                n_updates=args.updates,
                ewc_lambda=lam,
                ewc_gamma=gamma,
                hindsight_kwargs=hindsight,
                seed=rnd,
                trained_action=args.trained_action,
                intervention_penalty=args.intervention_penalty,
            )
            result = finetune_from_dataset(tuned, dataset, compute_reward, ewc, config)
            gate: dict[str, Any] = {}
            if args.gate:
                candidate = gate_results(tuned, envs, limits, args.eval_episodes)
                verdict = decide(running, candidate, GateConfig(n_episodes=args.eval_episodes, seed=GATE_SEED))
                gate = {"promoted": verdict.passed, "gate_reasons": verdict.reasons}
                if verdict.passed:
                    running = candidate
                    running_weights = copy.deepcopy((tuned.policy.state_dict(), tuned.policy.optimizer.state_dict()))
                    ewc = result.ewc
                else:  # back to the running policy (weights, normalizer, optimizer moments) and its EWC state
                    tuned.policy.load_state_dict(running_weights[0])
                    tuned.policy.optimizer.load_state_dict(running_weights[1])
            else:
                ewc = result.ewc
            scores = evaluate(tuned, envs, limits, args.eval_episodes, args.targets)
            history.append(
                {"round": rnd + 1, **scores, **gate, "ewc_penalty": result.stats.get("train/extra/ewc_penalty")}
            )
            print(f"seed {seed} {name} round {rnd + 1}: {scores}", flush=True)
        rows[name] = {"lambda": lam, "gamma": gamma, "rounds": history, "seconds": time.perf_counter() - t0}
    return {"train_seconds": train_s, "before": before, "line_logs_round0": line_stats, "variants": rows}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seeds", nargs="+", type=int, default=[1, 2, 3], help="one whole experiment per seed")
    parser.add_argument(
        "--tuned-seeds", nargs="*", type=int, default=[1], help="seeds looked at while choosing the defaults"
    )
    parser.add_argument("--train-steps", type=int, default=25_600, help="budget of the sim training (env steps)")
    parser.add_argument("--checkpoint", default="runs/continual/base_k2_seed{seed}.zip", help="{seed}: the seed")
    parser.add_argument("--delay", type=int, default=6, help="the drifted robot's delay (control steps)")
    parser.add_argument("--gain", type=float, default=1.5, help="the drifted robot's actuation gain")
    parser.add_argument("--targets", type=int, default=16, help="distinct targets on the line")
    parser.add_argument("--attempts", type=int, default=8, help="attempts per target and round (= group size)")
    parser.add_argument(
        "--explore-scale",
        type=float,
        default=DEFAULT_STD_SCALE,
        help="the line's noise std as a multiple of the policy's std (the runtime's explore_std_scale)",
    )
    parser.add_argument(
        "--intervention-penalty",
        type=float,
        default=RoundConfig.intervention_penalty,
        help="reward subtracted per logged tick the safety filter changed",
    )
    parser.add_argument("--updates", type=int, default=RoundConfig.n_updates, help="GRPO updates per round")
    parser.add_argument(
        "--trained-action",
        choices=TRAINED_ACTIONS,
        default=DEFAULT_TRAINED_ACTION,
        help="logged action fine-tuning trains on: the filter's command or the policy's sample",
    )
    parser.add_argument("--n-sampled-goal", type=int, help="hindsight goals per group (default: the buffer's)")
    parser.add_argument("--rounds", type=int, default=TARGET_ROUNDS)
    parser.add_argument("--lambdas", default=f"{DEFAULT_EWC_LAMBDA:g}", help="EWC lambdas to compare with plain")
    parser.add_argument("--gammas", default=f"{DEFAULT_EWC_GAMMA:g}", help="online-EWC decays (with each lambda)")
    parser.add_argument("--skip-plain", action="store_true", help="only the EWC variants (e.g. a gamma sweep)")
    parser.add_argument(
        "--gate",
        action="store_true",
        help="each round's candidate goes through the promotion gate (deploy.finetune.gate, on episodes of its own); "
        "a refused one is dropped and the running policy collects the next round, as on the line",
    )
    parser.add_argument("--eval-episodes", type=int, default=100)
    parser.add_argument("--out", default=str(RESULTS / "continual"))
    parser.add_argument("--render", help="only re-render the markdown of an existing JSON result")
    args = parser.parse_args(argv)
    if args.render:
        report = json.loads(Path(args.render).read_text())
        Path(args.render).with_suffix(".md").write_text(render_markdown(report))
        return 0
    th.set_num_threads(1)
    started = time.perf_counter()
    per_seed = {str(seed): run_seed(args, seed) for seed in args.seeds}
    report = {
        "config": vars(args),
        "seeds": per_seed,
        "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        "seconds": time.perf_counter() - started,
        "platform": platform.platform(),
        "torch_threads": th.get_num_threads(),
        "command": " ".join(["benchmarks/continual.py", *(sys.argv[1:] if argv is None else argv)]),
    }
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.with_suffix(".json").write_text(json.dumps(report, indent=2))
    out.with_suffix(".md").write_text(render_markdown(report))
    print(out.with_suffix(".md").read_text())
    return 0


def kept(scores: dict[str, Any], before: dict[str, Any]) -> float:
    """Share of the deployed policy's original-task success that ``scores`` keeps."""
    return scores["original"]["success"] / max(before["original"]["success"], 1e-9)


def interventions(scores: dict[str, Any]) -> float:
    """Safety-filter interventions per episode, summed over the new condition and the original task."""
    return scores["new"]["interventions_per_episode"] + scores["original"]["interventions_per_episode"]


def meets_target(scores: dict[str, Any], before: dict[str, Any]) -> bool:
    """The issue's target: >= 90% on the new condition, >= 95% of the original success kept, <= 0.1
    safety-filter interventions per episode."""
    return (
        scores["new"]["success"] >= TARGET_NEW
        and kept(scores, before) >= TARGET_KEPT
        and interventions(scores) <= TARGET_INTERVENTIONS
    )


def first_round_on_target(row: dict[str, Any], before: dict[str, Any]) -> int | None:
    return next((r["round"] for r in row["rounds"] if meets_target(r, before)), None)


def render_markdown(report: dict[str, Any]) -> str:
    cfg = report["config"]
    tuned = set(cfg.get("tuned_seeds") or [])
    lines = [
        "# Continual fine-tuning on the drifted robot: plain vs EWC on the same logs",
        "",
        f"Original task: DelayedFetchReach k=2. New condition: delay {cfg['delay']}, actuation gain {cfg['gain']} "
        f"(observation history kept at 2, as the deployed contract builds it). Line: {cfg['targets']} targets x "
        f"{cfg['attempts']} attempts per round, sampled actions (noise std {cfg.get('explore_scale', 1.0):g} x the "
        "policy's) behind the safety filter, through the tick log. "
        f"{cfg['updates']} GRPO updates per round on the "
        f"{cfg.get('trained_action', 'proposed')} actions, intervention penalty "
        f"{cfg.get('intervention_penalty', 0.0):g} per tick, {cfg['rounds']} round(s). "
        f"Success = deterministic closed loop through the safety filter, {cfg['eval_episodes']} random-goal episodes "
        "(and the line's targets). Command: "
        f"`{report.get('command', 'benchmarks/continual.py')}`.",
        "",
        f"Target: new condition >= {TARGET_NEW:.2f} within {TARGET_ROUNDS} rounds, keeping >= "
        f"{100 * TARGET_KEPT:.0f}% of the original success, <= {TARGET_INTERVENTIONS} safety-filter interventions "
        "per episode (new + original); median over the seeds.",
        "",
        "| policy | seed | round | new condition | line targets | original task | original kept (%) "
        "| interventions / episode (new + original) |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for seed, result in report["seeds"].items():
        before = result["before"]
        tag = f"{seed} ({'tuned' if int(seed) in tuned else 'unseen'})"
        lines.append(
            f"| deployed (sim-trained) | {tag} | - | {before['new']['success']:.2f} | "
            f"{before['new_line_targets']['success']:.2f} | {before['original']['success']:.2f} | 100 | "
            f"{interventions(before):.2f} |"
        )
        for name, row in result["variants"].items():
            for r in row["rounds"]:
                label = {True: f"{r['round']} (promoted)", False: f"{r['round']} (refused)"}.get(
                    r.get("promoted"), r["round"]
                )
                lines.append(
                    f"| {name} | {tag} | {label} | {r['new']['success']:.2f} | "
                    f"{r['new_line_targets']['success']:.2f} | {r['original']['success']:.2f} | "
                    f"{100 * kept(r, before):.0f} | {interventions(r):.2f} |"
                )
    lines += [
        "",
        "Round 1 of every variant trains on the same logs (collected once by the deployed policy) with the same "
        "budget; from round 2 on each variant collects its own logs with its current policy (online fine-tuning).",
        "",
        f"| policy | first round on target, per seed | median new condition at round {TARGET_ROUNDS} "
        f"| median kept (%) at round {TARGET_ROUNDS} | max interventions / episode | median meets the target |",
        "|---|---|---|---|---|---|",
    ]
    names = next(iter(report["seeds"].values()))["variants"].keys()
    for name in names:
        firsts, news, keeps, worst = [], [], [], 0.0
        for result in report["seeds"].values():
            row, before = result["variants"][name], result["before"]
            firsts.append(first_round_on_target(row, before))
            at = row["rounds"][min(TARGET_ROUNDS, len(row["rounds"])) - 1]
            news.append(at["new"]["success"])
            keeps.append(kept(at, before))
            worst = max([worst, *(interventions(r) for r in row["rounds"])])
        on_time = sorted(f is not None and f <= TARGET_ROUNDS for f in firsts)
        median_ok = on_time[len(on_time) // 2]
        shown = ", ".join("never" if f is None else str(f) for f in firsts)
        lines.append(
            f"| {name} | {shown} | {float(np.median(news)):.2f} | {100 * float(np.median(keeps)):.0f} | "
            f"{worst:.2f} | {'yes' if median_ok else 'no'} |"
        )
    lines += [
        "",
        f"Total {report['seconds']:.0f} s, peak RSS {report['peak_rss_mb']:.0f} MB, torch threads "
        f"{report['torch_threads']}.",
        "",
    ]
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
