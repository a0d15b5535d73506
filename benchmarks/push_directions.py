"""Which way does GRPO push the block, and which way do the goals lie? Hindsight's reach on delayed FetchPush.

Hindsight can only teach a push that some member made: a relabelled goal is where a member left the block. This
probe trains GRPO with the push launch file for ``--budget`` env steps and, before and after, rolls the policy out
on ``--episodes`` episodes of the task's own env (sampled actions: what the training rollouts do; deterministic:
what the evaluation scores). For each episode it measures, in the table's plane (x, y):

- the approach direction: from the gripper's start to the block's start;
- the push direction: from the block's start to where it ended, for episodes that moved it past the 5 cm radius
  (the pushes hindsight relabels with);
- the goal direction: from the block's start to the goal.

Each direction is reported as its cosine with the approach direction: 1 = straight on, away from the gripper's start
(what the gripper does when it drives at the block); -1 = back toward the gripper's start (which needs the gripper to
go round the block first). The shares of pushes and of goals in each of four sectors (straight on: cos > 0.7;
sideways +: 0 < cos <= 0.7; sideways -: -0.7 < cos <= 0; back: cos <= -0.7) show where hindsight has examples and
where the task asks for them, and the deterministic policy's success per goal sector shows what it learned there.

    .venv/bin/python benchmarks/push_probe.py --probe directions --seeds 0 1000 --budget 192000

(``push_probe.py`` runs each seed in a fresh process and writes the JSON and the table; the findings are in
docs/benchmarks/push-study.md.)
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np

from benchmarks.learning import TASKS, build_model, peak_rss_mib
from envs.object_approach import GRIPPER_XYZ, OBJECT_XYZ  # the Fetch object task observation (m)

TITLE = "Delayed FetchPush: which way GRPO pushes the block, and which way the goals lie"
DESCRIPTION = (
    "Directions in the table's plane, as cosines with the approach direction (gripper start -> block start); sectors: "
    "straight on cos > 0.7, sideways 0..0.7 and -0.7..0, back cos <= -0.7. Pushes: sampled actions, episodes that "
    "moved the block past 5 cm (what hindsight relabels with). Goals and success: deterministic actions on the same "
    "number of episodes."
)
XY = slice(0, 2)  # the table's plane: x, y of a position (m)
# Sector edges in cosine with the approach direction: straight on, sideways (two halves), back.
SECTORS = (("straight on", 0.7, 1.01), ("sideways +", 0.0, 0.7), ("sideways -", -0.7, 0.0), ("back", -1.01, -0.7))
MIN_DIRECTION_M = 1e-3  # a displacement shorter than this has no direction


def cosines(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Cosine of the angle between rows of ``a`` and ``b`` ([N, 2]); NaN where either is shorter than 1 mm."""
    na, nb = np.linalg.norm(a, axis=-1), np.linalg.norm(b, axis=-1)
    ok = (na > MIN_DIRECTION_M) & (nb > MIN_DIRECTION_M)
    return np.where(ok, (a * b).sum(-1) / np.maximum(na * nb, MIN_DIRECTION_M**2), np.nan)


def sector_shares(cos: np.ndarray) -> dict[str, float]:
    """Share of the finite cosines in each of ``SECTORS``."""
    cos = cos[np.isfinite(cos)]
    return {name: float(((cos > lo) & (cos <= hi)).mean()) if cos.size else 0.0 for name, lo, hi in SECTORS}


def roll_out(model: Any, env: Any, n_rounds: int, deterministic: bool) -> dict[str, np.ndarray]:
    """``n_rounds`` resets of the VecEnv, each run to the time limit; per-episode start/end positions and success."""
    rows: dict[str, list[np.ndarray]] = {k: [] for k in ("gripper0", "block0", "block_end", "goal", "success")}
    steps = model.n_steps
    for _ in range(n_rounds):
        obs = env.reset()
        rows["gripper0"].append(obs["observation"][:, GRIPPER_XYZ][:, XY].copy())
        rows["block0"].append(obs["observation"][:, OBJECT_XYZ][:, XY].copy())
        rows["goal"].append(obs["desired_goal"][:, XY].copy())
        infos: list[dict[str, Any]] = []
        for _ in range(steps):
            obs, _, _, infos = env.step(model.predict(obs, deterministic=deterministic)[0])
        rows["block_end"].append(np.array([info["terminal_observation"]["achieved_goal"][XY] for info in infos]))
        rows["success"].append(np.array([float(info["is_success"]) for info in infos]))
    return {k: np.concatenate(v) for k, v in rows.items()}


def directions(model: Any, env: Any, n_rounds: int, radius_m: float) -> dict[str, Any]:
    """Push and goal directions (sampled actions) and success per goal sector (deterministic actions)."""
    sampled = roll_out(model, env, n_rounds, deterministic=False)
    approach = sampled["block0"] - sampled["gripper0"]
    push = sampled["block_end"] - sampled["block0"]
    moved = np.linalg.norm(push, axis=-1) > radius_m
    greedy = roll_out(model, env, n_rounds, deterministic=True)
    goal_cos = cosines(greedy["goal"] - greedy["block0"], greedy["block0"] - greedy["gripper0"])
    success_by_sector = {}
    for name, lo, hi in SECTORS:
        inside = (goal_cos > lo) & (goal_cos <= hi)
        success_by_sector[name] = [float(greedy["success"][inside].mean()) if inside.any() else 0.0, int(inside.sum())]
    return {
        "episodes": len(moved),
        "moved_share": float(moved.mean()),
        "push_sectors": sector_shares(cosines(push[moved], approach[moved])),
        "goal_sectors": sector_shares(goal_cos),
        "deterministic_success": float(greedy["success"].mean()),
        "deterministic_success_by_goal_sector": success_by_sector,
    }


def run_one(seed: int, budget: int, n_rounds: int) -> dict[str, Any]:
    """Measure the directions of one seed's policy before and after ``budget`` env steps of training."""
    import torch as th
    from stable_baselines3.common.env_util import make_vec_env

    th.set_num_threads(1)  # (the ids are registered: envs.object_approach, imported above, imports envs)
    task = TASKS["push"]
    model = build_model(task, "grpo", seed)
    env = make_vec_env(task.env_id, n_envs=model.n_envs, seed=seed + 1, env_kwargs=task.env_kwargs)
    radius_m = float(env.get_attr("distance_threshold", [0])[0])
    start = time.perf_counter()
    before = directions(model, env, n_rounds, radius_m)
    model.learn(budget)
    after = directions(model, env, n_rounds, radius_m)
    return {
        "seed": seed,
        "budget": budget,
        "before": before,
        "after": after,
        "s": time.perf_counter() - start,
        "peak_rss_mib": peak_rss_mib(),
    }


def _shares(shares: dict[str, float]) -> str:
    return " / ".join(f"{shares[name]:.2f}" for name, _, _ in SECTORS)


def table(runs: list[dict[str, Any]], tuned: set[int]) -> str:
    """One row per (seed, before/after training)."""
    names = " / ".join(name for name, _, _ in SECTORS)
    lines = [
        f"| seed | policy | episodes | block moved >5 cm | pushes by direction ({names}) | goals by direction "
        f"({names}) | deterministic success | deterministic success by goal direction ({names}) |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for run in runs:
        seed = f"{run['seed']} ({'tuned' if run['seed'] in tuned else 'unseen'})"
        for when, label in (("before", "initial"), ("after", f"after {run['budget']} env steps")):
            m = run[when]
            per_goal = m["deterministic_success_by_goal_sector"]
            by_sector = " / ".join(f"{per_goal[name][0]:.2f} (n={per_goal[name][1]})" for name, _, _ in SECTORS)
            lines.append(
                f"| {seed} | {label} | {m['episodes']} | {m['moved_share']:.2f} | {_shares(m['push_sectors'])} | "
                f"{_shares(m['goal_sectors'])} | {m['deterministic_success']:.2f} | {by_sector} |"
            )
    return "\n".join(lines)
