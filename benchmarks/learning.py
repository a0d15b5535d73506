"""Learning benchmark on DelayedFetchReach (k=2): GRPO + hindsight vs SB3 SAC + HerReplayBuffer vs SB3 PPO.

Side by side in one run on this machine, one fresh process per (variant, seed) so that each run's peak memory
(ru_maxrss) is its own. Every variant is evaluated on the same 30 fixed episodes (a 30-env eval VecEnv
re-seeded with ``EVAL_SEED`` before each evaluation), deterministic actions, success = ``is_success`` at the
last step. A run stops at its first evaluation with >= 95% success (or at its budget) and reports the env steps
and the wall seconds to get there (training only, and with the evaluations included).

Variants:

- ``grpo``: ``GRPO("MultiInputPolicy", env)`` with its defaults (G=8, 6 groups, "final" hindsight, 8 goals,
  truncated IS weights), evaluated after every update (2,400 env steps);
- ``grpo_2threads``: the same, its envs stepped on 2 threads (``ThreadedVecEnv``; MuJoCo releases the GIL): what
  GRPO gets from this machine's second core, which the 1-env SAC+HER cannot use (torch stays at 1 thread);
- ``grpo_no_hindsight``: ``rollout_buffer_class=GroupRolloutBuffer`` (plain GRPO, the ablation);
- ``grpo_no_is``: hindsight without the importance-weight correction (``is_correction=False``);
- ``grpo_hard``: defaults on a harder task (delay drawn per episode in 1..3, distance_threshold 0.02 m);
- ``sac_her``: SB3 SAC + HerReplayBuffer with rl-zoo3's FetchReach hyperparameters (future strategy, 4 goals,
  lr 1e-3, batch 256, gamma 0.95, 64x64 net with one critic, learning_starts 1000, observation normalization);
  zoo's TimeFeatureWrapper is left out (sb3_contrib is not a dependency), rewards are not normalized;
- ``sac_her_hard``: the same SAC + HER on the harder task;
- ``ppo``: SB3 PPO, 8 envs, n_steps 256, gamma 0.98 (otherwise SB3 defaults).

    .venv/bin/python benchmarks/learning.py                          # the full comparison (about an hour here)
    .venv/bin/python benchmarks/learning.py --variants grpo sac_her --seeds-ours 3 --seeds-baselines 1 \\
        --budget-sac 30000                                            # a reduced run

Writes benchmarks/results/learning.json, learning.md and learning.png.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import platform
import resource
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a checkout without installing

RESULTS = Path(__file__).resolve().parent / "results"
ENV_ID = "DelayedFetchReach-v0"
EVAL_EPISODES = 30
EVAL_SEED = 123_456
EPISODE_STEPS = 50
SUCCESS_TARGET = 0.95
GRPO_VARIANTS = ("grpo", "grpo_2threads", "grpo_no_hindsight", "grpo_no_is", "grpo_hard")
ALL_VARIANTS = (*GRPO_VARIANTS, "sac_her", "sac_her_hard", "ppo")
HARD_ENV_KWARGS = {"delay_range": (1, 3), "distance_threshold": 0.02}
PPO_ENVS = 8
PPO_STEPS_PER_ENV = 256


def env_kwargs_for(variant: str) -> dict[str, Any]:
    return dict(HARD_ENV_KWARGS) if variant.endswith("_hard") else {"delay": 2}


def build_model(variant: str, seed: int) -> Any:
    """The model of one variant, with its training VecEnv."""
    from stable_baselines3 import PPO, SAC, HerReplayBuffer
    from stable_baselines3.common.env_util import make_vec_env
    from stable_baselines3.common.vec_env import VecNormalize

    from robot_grpo import DEFAULT_N_ENVS, GRPO, GroupRolloutBuffer
    from robot_grpo.threaded_vec_env import ThreadedVecEnv

    kwargs = env_kwargs_for(variant)
    if variant.startswith("grpo"):
        threads = {"vec_env_cls": ThreadedVecEnv, "vec_env_kwargs": {"n_threads": 2}} if "2threads" in variant else {}
        env = make_vec_env(ENV_ID, n_envs=DEFAULT_N_ENVS, seed=seed, env_kwargs=kwargs, **threads)
        extra: dict[str, Any] = {}
        if variant == "grpo_no_hindsight":
            extra["rollout_buffer_class"] = GroupRolloutBuffer
        if variant == "grpo_no_is":
            extra["rollout_buffer_kwargs"] = {"is_correction": False}
        return GRPO("MultiInputPolicy", env, seed=seed, **extra)
    if variant.startswith("sac_her"):
        env = VecNormalize(make_vec_env(ENV_ID, n_envs=1, seed=seed, env_kwargs=kwargs), norm_reward=False)
        return SAC(
            "MultiInputPolicy",
            env,
            replay_buffer_class=HerReplayBuffer,
            replay_buffer_kwargs={"goal_selection_strategy": "future", "n_sampled_goal": 4},
            buffer_size=1_000_000,
            ent_coef="auto",
            batch_size=256,
            gamma=0.95,
            learning_rate=1e-3,
            learning_starts=1000,
            policy_kwargs={"net_arch": [64, 64], "n_critics": 1},
            seed=seed,
        )
    if variant == "ppo":
        env = make_vec_env(ENV_ID, n_envs=PPO_ENVS, seed=seed, env_kwargs=kwargs)
        return PPO("MultiInputPolicy", env, n_steps=PPO_STEPS_PER_ENV, batch_size=256, gamma=0.98, seed=seed)
    raise ValueError(f"unknown variant {variant!r}; choose from {ALL_VARIANTS}")


def run_one(variant: str, seed: int, budget: int, eval_every: int, threads: int) -> dict[str, Any]:
    """Train one (variant, seed) until >= 95% success or the budget; returns the curve and the figures."""
    import torch as th
    from stable_baselines3.common.callbacks import BaseCallback
    from stable_baselines3.common.env_util import make_vec_env

    import envs  # noqa: F401  (registers the ids)

    th.set_num_threads(threads)
    model = build_model(variant, seed)
    eval_env = make_vec_env(ENV_ID, n_envs=EVAL_EPISODES, seed=EVAL_SEED, env_kwargs=env_kwargs_for(variant))
    normalizer = model.get_vec_normalize_env()
    curve: list[dict[str, float]] = []
    clock = {"start": time.perf_counter(), "eval": 0.0}

    def evaluate() -> float:
        t0 = time.perf_counter()
        if normalizer is not None:
            normalizer.training = False
        eval_env.seed(EVAL_SEED)
        obs = eval_env.reset()
        infos: list[dict[str, Any]] = []
        for _ in range(EPISODE_STEPS):
            model_obs = normalizer.normalize_obs(obs) if normalizer is not None else obs
            obs, _, _, infos = eval_env.step(model.predict(model_obs, deterministic=True)[0])
        if normalizer is not None:
            normalizer.training = True
        success = float(np.mean([info["is_success"] for info in infos]))
        clock["eval"] += time.perf_counter() - t0
        total = time.perf_counter() - clock["start"]
        curve.append(
            {"steps": model.num_timesteps, "success": success, "train_s": total - clock["eval"], "total_s": total}
        )
        return success

    class EvalEvery(BaseCallback):
        """Evaluate when a rollout starts after ``eval_every`` more env steps (GRPO: after each update)."""

        def __init__(self) -> None:
            super().__init__()
            self.next_eval, self.reached = eval_every, False

        def _on_rollout_start(self) -> None:
            if self.model.num_timesteps >= self.next_eval and not self.reached:
                self.next_eval = self.model.num_timesteps + eval_every
                self.reached = evaluate() >= SUCCESS_TARGET

        def _on_step(self) -> bool:
            return not self.reached

    callback = EvalEvery()
    model.learn(budget, callback=callback)
    if not callback.reached:
        evaluate()
    hit = next((p for p in curve if p["success"] >= SUCCESS_TARGET), None)
    return {
        "variant": variant,
        "seed": seed,
        "curve": curve,
        "reached": hit is not None,
        "steps_to_target": hit["steps"] if hit else None,
        "train_s_to_target": hit["train_s"] if hit else None,
        "total_s_to_target": hit["total_s"] if hit else None,
        "final_success": curve[-1]["success"],
        "peak_rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0,
    }


def _summary(values: list[float]) -> str:
    if not values:
        return "-"
    return f"{statistics.median(values):.0f} ({min(values):.0f}-{max(values):.0f})"


def _fraction(values: list[float]) -> str:
    return f"{statistics.median(values):.2f} ({min(values):.2f}-{max(values):.2f})"


def summarize(runs: list[dict[str, Any]], variants: list[str]) -> tuple[list[dict[str, Any]], str]:
    """Per-variant rows (median, min, max over seeds of the runs that reached the target) and a markdown table."""
    rows = []
    lines = [
        f"| variant | seeds reaching {SUCCESS_TARGET:.0%} | env steps | train s | s incl. eval | final success "
        "| most env steps run | peak RSS MiB |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for variant in variants:
        mine = [r for r in runs if r["variant"] == variant]
        if not mine:
            continue
        ok = [r for r in mine if r["reached"]]
        row = {
            "variant": variant,
            "seeds": len(mine),
            "reached": len(ok),
            "steps": [r["steps_to_target"] for r in ok],
            "train_s": [r["train_s_to_target"] for r in ok],
            "total_s": [r["total_s_to_target"] for r in ok],
            "final_success": [r["final_success"] for r in mine],
            "peak_rss_mib": max(r["peak_rss_mib"] for r in mine),
            "budget_steps": max(r["curve"][-1]["steps"] for r in mine),
        }
        rows.append(row)
        lines.append(
            f"| {variant} | {len(ok)}/{len(mine)} | {_summary(row['steps'])} | {_summary(row['train_s'])} | "
            f"{_summary(row['total_s'])} | {_fraction(row['final_success'])} | {row['budget_steps']} | "
            f"{row['peak_rss_mib']:.0f} |"
        )
    note = (
        "Figures: median (min-max) over the seeds that reached the target; '-' = none reached it. "
        "Final success: median (min-max) over all seeds at the run's last evaluation (a run stops at its first "
        f"evaluation >= {SUCCESS_TARGET:.0%})."
    )
    return rows, "\n".join([*lines, "", note, *ratio_lines(rows)])


def ratio_lines(rows: list[dict[str, Any]]) -> list[str]:
    """GRPO vs SAC+HER on the k=2 task, medians of the seeds that reached the target (empty if either has none)."""
    by_name = {row["variant"]: row for row in rows}
    ours, peer = by_name.get("grpo"), by_name.get("sac_her")
    if not ours or not peer or not ours["steps"] or not peer["steps"]:
        return []
    steps = statistics.median(ours["steps"]) / statistics.median(peer["steps"])
    wall = statistics.median(peer["train_s"]) / statistics.median(ours["train_s"])
    lines = [
        "",
        f"GRPO vs SAC+HER (medians): {steps:.2f}x the env steps; SAC+HER takes {wall:.1f}x GRPO's training seconds.",
    ]
    threaded = by_name.get("grpo_2threads")
    if threaded and threaded["train_s"]:
        ratio = statistics.median(peer["train_s"]) / statistics.median(threaded["train_s"])
        lines.append(f"With GRPO's envs on 2 threads: SAC+HER takes {ratio:.1f}x GRPO's training seconds.")
    return lines


def plot(runs: list[dict[str, Any]], variants: list[str], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(8, 4.5))
    for i, variant in enumerate(variants):
        color = f"C{i}"
        for j, run in enumerate(r for r in runs if r["variant"] == variant):
            steps = [p["steps"] for p in run["curve"]]
            ax.plot(
                steps, [p["success"] for p in run["curve"]], color=color, alpha=0.7, label=variant if j == 0 else None
            )
    ax.axhline(SUCCESS_TARGET, color="grey", linestyle="--", linewidth=1)
    ax.set_xlabel("env steps")
    ax.set_ylabel(f"deterministic success ({EVAL_EPISODES} fixed episodes)")
    ax.set_title(f"{ENV_ID}: one line per seed")
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=120)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--variants", nargs="+", default=list(ALL_VARIANTS), choices=ALL_VARIANTS)
    parser.add_argument("--seeds-ours", type=int, default=5, help="seeds of the default GRPO variant")
    parser.add_argument("--seeds-ablations", type=int, default=3, help="seeds per GRPO ablation and per hard variant")
    parser.add_argument("--seeds-baselines", type=int, default=3, help="seeds for SAC+HER and PPO on the k=2 task")
    parser.add_argument("--budget-ours", type=int, default=32_000, help="env steps per GRPO run")
    parser.add_argument("--budget-sac", type=int, default=30_000, help="env steps per SAC+HER run")
    parser.add_argument("--budget-hard", type=int, default=64_000, help="env steps per run on the harder task")
    parser.add_argument("--budget-ppo", type=int, default=100_000, help="env steps per PPO run")
    parser.add_argument("--eval-every-sac", type=int, default=1_000, help="env steps between SAC+HER evaluations")
    parser.add_argument("--eval-every-ppo", type=int, default=PPO_ENVS * PPO_STEPS_PER_ENV)
    parser.add_argument("--threads", type=int, default=1, help="torch threads per run (all variants alike)")
    parser.add_argument("--name", default="learning", help="output file stem in benchmarks/results/")
    parser.add_argument("--resummarize", action="store_true", help="rewrite the table and plot from the JSON")
    args = parser.parse_args()
    if args.resummarize:
        saved = json.loads((RESULTS / f"{args.name}.json").read_text())
        variants = [v for v in ALL_VARIANTS if any(r["variant"] == v for r in saved["runs"])]
        rows, table = summarize(saved["runs"], variants)
        saved["summary"] = rows
        (RESULTS / f"{args.name}.json").write_text(json.dumps(saved, indent=1))
        command = " ".join(["benchmarks/learning.py", *(saved["meta"].get("argv") or [])])
        header = f"# Learning benchmark: {ENV_ID}\n\nCommand: `{command}`\n\n"
        (RESULTS / f"{args.name}.md").write_text(header + table + "\n")
        plot(saved["runs"], variants, RESULTS / f"{args.name}.png")
        print(table)
        return

    from robot_grpo import DEFAULT_N_ENVS  # one GRPO update = one episode in each of its envs

    jobs = []
    for variant in args.variants:
        if variant.startswith("grpo"):
            n_seeds = args.seeds_ours if variant in ("grpo", "grpo_2threads") else args.seeds_ablations
            budget = args.budget_hard if variant.endswith("_hard") else args.budget_ours
            jobs += [(variant, s, budget, DEFAULT_N_ENVS * EPISODE_STEPS) for s in range(n_seeds)]
        elif variant.startswith("sac_her"):
            budget = args.budget_hard if variant.endswith("_hard") else args.budget_sac
            n_seeds = args.seeds_ablations if variant.endswith("_hard") else args.seeds_baselines
            jobs += [(variant, s, budget, args.eval_every_sac) for s in range(n_seeds)]
        else:
            jobs += [(variant, s, args.budget_ppo, args.eval_every_ppo) for s in range(args.seeds_baselines)]
    runs = []
    ctx = mp.get_context("spawn")
    for variant, seed, budget, eval_every in jobs:
        with ctx.Pool(1, maxtasksperchild=1) as pool:
            run = pool.apply(run_one, (variant, seed, budget, eval_every, args.threads))
        runs.append(run)
        print(
            f"{variant:18s} seed {seed}: reached={run['reached']} steps={run['steps_to_target']} "
            f"train_s={run['train_s_to_target']} final={run['final_success']:.2f}",
            flush=True,
        )
    rows, table = summarize(runs, args.variants)
    RESULTS.mkdir(parents=True, exist_ok=True)
    meta = {
        "env": ENV_ID,
        "eval_episodes": EVAL_EPISODES,
        "target": SUCCESS_TARGET,
        "machine": platform.platform(),
        "python": platform.python_version(),
        "args": vars(args),
        "argv": sys.argv[1:],
        "peak_rss_mib_parent": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0,
    }
    (RESULTS / f"{args.name}.json").write_text(json.dumps({"meta": meta, "summary": rows, "runs": runs}, indent=1))
    header = f"# Learning benchmark: {ENV_ID}\n\nCommand: `{' '.join(sys.argv)}`\n\n"
    (RESULTS / f"{args.name}.md").write_text(header + table + "\n")
    plot(runs, args.variants, RESULTS / f"{args.name}.png")
    print(table)


if __name__ == "__main__":
    main()
