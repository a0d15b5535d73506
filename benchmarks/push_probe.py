"""Why GRPO does not learn delayed FetchPush: short runs of GRPO variants that log what the success rate hides.

The full push benchmark (``learning.py --task push``) runs 1M env steps and shows one number at every evaluation
(6%, what zero actions score). This probe runs each variant of ``VARIANTS`` (overrides of
``launch/train_delayed_push.yaml``'s hyperparameters) for a short budget and records, every ``--eval-every`` env
steps:

- ``success``: deterministic success on ``learning.py``'s 50 fixed evaluation episodes;
- ``block_moved``: share of the training episodes (sampled actions) of the last rollouts that moved the block more
  than the 5 cm success radius, i.e. that give hindsight a goal the start does not already satisfy;
- ``closest_approach_m``: mean over the last rollout's episodes of the closest gripper-to-block distance (metres);
- ``mean_abs`` / ``mean_outside``: mean |policy mean| over the last rollout's states and the share of mean
  components outside the action bounds [-1, 1] (the env clips actions, so those no longer explore);
- ``gripper_to_goal_m`` (start -> end): mean over the last rollout's episodes of the gripper-to-goal distance at
  the first and the last step (metres). The end falling below the start means the policy brings the gripper, not
  the block, to the goal: in the hindsight data the gripper ends next to the block it pushed, so "gripper at the
  goal" predicts a relabelled success as well as "block at the goal" does, and it is far easier to learn;
- ``std``: the policy's action standard deviation, averaged over the action components (the exploration left);
- the buffer's hindsight statistics (relabelled goals in use, their success).

    .venv/bin/python benchmarks/push_probe.py --seeds 0 1000 --budget 150000
    .venv/bin/python benchmarks/push_probe.py --variants future_32_24_groups_2_epochs --seeds 0 1000 \
        --budget 240000 --out benchmarks/results/push_probe_24_groups

Writes benchmarks/results/push_probe.json and .md. Each (variant, seed) runs in a fresh process.
"""

from __future__ import annotations

import argparse
import copy
import json
import multiprocessing as mp
import platform
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # run from a checkout without installing

from benchmarks.learning import (  # noqa: E402
    EVAL_EPISODES,
    EVAL_SEED,
    TASKS,
    grpo_env_kwargs,
    grpo_hyperparameters,
    peak_rss_mib,
)
from envs.object_approach import GRIPPER_XYZ  # noqa: E402  (the Fetch object task observation, m)

RESULTS = Path(__file__).resolve().parent / "results"
RECENT_ROLLOUTS = 5  # rollouts averaged into block_moved
ENV_KWARGS = "env_kwargs"  # a variant's key for env overrides (merged into the task's), not a GRPO argument
GRIPPER_TO_BLOCK = slice(6, 9)  # FetchPush observation: gripper xyz, block xyz, block - gripper, ...

# Overrides of the launch file's hyperparameters (rollout buffer options are merged into the launch file's, not
# replaced). Each of DEFAULT_VARIANTS adds one change to the one before it; the 24-group variant changes the batch
# shape of plus_future_32 instead. Since the launch file took approach_coef, bound_coef and skip_start_goals
# (2026-12-02), "launch_file" trains as approach_10 does, and the other rows (sparse reward unless they say) add to
# its hyperparameters; the push_probe*.md tables that predate it ran with the launch file of their day
# (dual_clip only).
VARIANTS: dict[str, dict[str, Any]] = {
    "launch_file": {},
    "skip_start_goals": {"rollout_buffer_kwargs": {"skip_start_goals": True}},
    "plus_bound_coef": {"bound_coef": 1.0, "rollout_buffer_kwargs": {"skip_start_goals": True}},
    "plus_future_32": {
        "bound_coef": 1.0,
        "rollout_buffer_kwargs": {"skip_start_goals": True, "hindsight_strategy": "future", "n_sampled_goal": 32},
    },
    "future_32_24_groups_2_epochs": {  # a 4x larger batch per update, fitted less: less noise per update
        "bound_coef": 1.0,
        "n_groups": 24,
        "n_epochs": 2,
        "rollout_buffer_kwargs": {"skip_start_goals": True, "hindsight_strategy": "future", "n_sampled_goal": 32},
    },
    "plus_kl_to_start_0.5": {
        "bound_coef": 1.0,
        "beta": 0.5,
        "ref_update_interval": 0,
        "rollout_buffer_kwargs": {"skip_start_goals": True, "hindsight_strategy": "future", "n_sampled_goal": 32},
    },
    # Trust regions over every row, not only the few with a nonzero advantage (plus_bound_coef's settings).
    "kl_to_rollout_policy_0.5": {  # KL to the policy that collected the rollout (reference refreshed every update)
        "bound_coef": 1.0,
        "beta": 0.5,
        "ref_update_interval": 1,
        "rollout_buffer_kwargs": {"skip_start_goals": True},
    },
    "target_kl_0.01": {  # stop the update's epochs once the approximate KL to the rollout policy passes 0.015
        "bound_coef": 1.0,
        "target_kl": 0.01,
        "rollout_buffer_kwargs": {"skip_start_goals": True},
    },
    # The env's dense reward (minus the block-to-goal distance, metres): a member that nudges the block toward the
    # goal already beats its group, where the sparse reward gives every member the same -1 until one scores. (The
    # start-goal test reads the reward as sparse, so skip_start_goals cannot tell a still block here.)
    "dense_reward": {
        "bound_coef": 1.0,
        ENV_KWARGS: {"reward_type": "dense"},
    },
    # The sparse reward plus 10 per metre of block-to-goal distance (the buffer's distance term): the same ranking,
    # with success and the start-goal test still read from the sparse reward.
    "distance_10": {
        "bound_coef": 1.0,
        "rollout_buffer_kwargs": {"skip_start_goals": True, "distance_coef": 10.0},
    },
    # As distance_10, advantages divided by the batch's std, not each group's: a group whose block only trembled
    # (returns apart by micrometres) is not blown up to unit advantages.
    "distance_10_batch_scale": {
        "bound_coef": 1.0,
        "scale_advantages": "batch",
        "rollout_buffer_kwargs": {"skip_start_goals": True, "distance_coef": 10.0},
    },
    # plus_bound_coef with 10 per metre of new closest gripper-to-block approach (envs.object_approach): getting
    # the gripper to the block is scored before any push is, and no push is penalized.
    "approach_10": {
        "bound_coef": 1.0,
        "rollout_buffer_kwargs": {"skip_start_goals": True},
        ENV_KWARGS: {"approach_coef": 10.0},
    },
    # The launch file (approach_10) keeping its exploration: on seed 0 the std fell 0.58 -> 0.32 in 300k env steps and
    # success peaked at 22% (192k), then fell back. An entropy bonus, or fitting each rollout half as hard.
    "launch_file_ent_0.01": {"ent_coef": 0.01},
    "launch_file_4_epochs": {"n_epochs": 4},
    # With the block moving in most episodes, more relabelled successes per rollout: 16 "future" goals (the block
    # part-way through a push counts too), or the importance weights hindsight is defined with.
    "launch_file_future_16": {"rollout_buffer_kwargs": {"hindsight_strategy": "future", "n_sampled_goal": 16}},
    "launch_file_is_correction": {"rollout_buffer_kwargs": {"is_correction": True}},
    # launch_file_future_16 with its exploration held: over 1M env steps its std fell 0.57 -> 0.17 and success fell
    # back from its 0.24 peak (std 0.34). A floor at std 0.37 (log -1.0) binds from about 250k env steps on.
    "launch_file_future_16_std_floor_0.37": {
        "min_log_std": -1.0,
        "rollout_buffer_kwargs": {"hindsight_strategy": "future", "n_sampled_goal": 16},
    },
    # The per-member signal is one return compared inside a group: 16 members per group make that comparison less
    # noisy (twice the env steps per update); a shorter horizon (gamma 0.95) credits the steps near a push more.
    "launch_file_16_members": {"group_size": 16},
    "launch_file_gamma_0.95": {"gamma": 0.95},
    # Groups compared from the middle of an episode: half of each rollout's groups start from a state one member of
    # the previous rollout had reached after a random number of steps (often next to or at the block), so members
    # that push differently from the same state are ranked against each other (GRPO restart_fraction).
    "launch_file_restart_0.5": {"restart_fraction": 0.5},
    # Rerun 2026-12-04 on seed 1000 in a fresh environment (same code; not bit-identical to the 12-03 run, whose
    # first evaluation it no longer matches): best 12% (was 24%), last 2% (push_probe_restart_1m_rerun.md). The
    # peaks are as much seed-and-noise as method.
    # restart_fraction 0.5 raised the peaks (24% / 16% at 1M on the unseen seeds) but decayed as the std fell
    # (0.59 -> 0.2); the std floor kept half the episodes touching the block but did not rank the pushes. Both.
    "restart_0.5_future_16_std_floor_0.37": {
        "restart_fraction": 0.5,
        "min_log_std": -1.0,
        "rollout_buffer_kwargs": {"hindsight_strategy": "future", "n_sampled_goal": 16},
    },
    # ... it was worse: 6% best and last on the unseen seeds 1000 and 1001 at 1M (what zero actions score), the block
    # moved in 10-22% of the first episodes and 0-2% of the last (push_probe_restart_floor_1m.md). The peaks of
    # restart_0.5 fell with its policy drifting, not with the std alone: cap each update's step instead (the
    # epochs stop once the approximate KL to the rollout policy passes 1.5 x target_kl).
    # ... no better: 6% best on both unseen seeds at 1M (push_probe_restart_target_kl_1m.md); the std held (0.60 ->
    # 0.55) but the gripper learned to keep away from the block (closest approach 0.06 -> 0.28 m, the block moved in
    # 27% / 8% of the first episodes and 3% / 0% of the last), as with the std floor: what restart_0.5 alone
    # learned (its peaks) came with the std falling, and holding exploration up by either means lost it.
    "restart_0.5_target_kl_0.01": {"restart_fraction": 0.5, "target_kl": 0.01},
    # restart_0.5 learning a third as fast (the launch file's 3e-4 -> 1e-4): its peaks came and went within 200k env
    # steps; smaller steps may keep what a peak learned.
    # ... no better either: 6% best and last on both unseen seeds at 1M (push_probe_restart_lr_1m.md), the gripper
    # again ending away from the block (closest approach 0.14 / 0.08 -> 0.28 / 0.24 m).
    "restart_0.5_lr_1e-4": {"restart_fraction": 0.5, "learning_rate": 1e-4},
    # The two that peaked highest, together without the std floor: restart_0.5 (24% / 16% on the unseen seeds, 12-03)
    # and launch_file_future_16 (24% on seed 0): more relabelled successes per group started next to the block.
    # ... no better: 6% best and last on both unseen seeds at 1M (push_probe_restart_future16_1m.md, 2026-12-04; 24.5
    # min per seed, 2 in parallel); the block moved in 10% / 22% of the first episodes and 0% / 2% of the last, the
    # closest approach grew 0.12 / 0.07 -> 0.20 / 0.17 m: the same retreat from the block as every variant since.
    "restart_0.5_future_16": {
        "restart_fraction": 0.5,
        "rollout_buffer_kwargs": {"hindsight_strategy": "future", "n_sampled_goal": 16},
    },
    # Most goals lie behind the block as seen from the gripper's start (push_directions.md); the reaching bonus pays for
    # driving at the block, which pushes it the other way. benchmarks/push_potential.py pays for the pushing pose
    # behind the block on the goal line (over the block, not through it) and for the block's progress, rescored under
    # every hindsight goal; the task's own env, no reaching bonus.
    # ... better than the launch file, far from 90%: at 300k 18% / 16% best on seeds 0 / unseen 1000
    # (push_probe_over_block.md); at 1M on the unseen seeds 1000 / 1001 best 26% / 10%, second-half mean 17% / 9%,
    # last 8% / 6% (push_probe_over_block_1m.md; the launch file: best 10% / 6%, last 6% / 2%), the std falling
    # 0.60 -> 0.16 / 0.12 and the share of episodes that move the block 0.6 -> 0.28 as before.
    "over_block_potential": {"rollout_buffer_class": "PushPotentialBuffer"},
    # over_block_potential keeping its exploration: a floor at std 0.37 (log -1.0), reached near 250k env steps.
    # ... no better: unseen seeds 1000 / 1001 best 18% / 10%, second-half mean 11% / 7%, last 12% / 10%; the block
    # still moves in 36% / 49% of the last episodes (push_probe_over_block_floor_1m.md).
    "over_block_potential_std_floor_0.37": {"rollout_buffer_class": "PushPotentialBuffer", "min_log_std": -1.0},
    # over_block_potential with advantages divided by the batch's std, not each group's: the shaping makes every
    # member's return differ a little in every (group, step) cell, and the group scale blows millimetres of
    # difference up to unit advantages (Dr. GRPO's point).
    # ... worse: best 8% / 8%, second-half mean 6% / 7%, and the block moved in 3% / 2% of the last episodes
    # (push_probe_over_block_batch_1m.md): the group scale is what keeps the small differences ranked.
    "over_block_potential_batch_scale": {"rollout_buffer_class": "PushPotentialBuffer", "scale_advantages": "batch"},
    # approach_10 with the distance term, advantages scaled by the batch's std (as distance_10_batch_scale).
    "approach_10_distance_10": {
        "bound_coef": 1.0,
        "scale_advantages": "batch",
        "rollout_buffer_kwargs": {"skip_start_goals": True, "distance_coef": 10.0},
        ENV_KWARGS: {"approach_coef": 10.0},
    },
}


# What ``--variants`` runs by default (the table in benchmarks/results/push_probe.md); the 24-group row ran apart,
# with a longer budget (benchmarks/results/push_probe_24_groups.md).
DEFAULT_VARIANTS = ("launch_file", "skip_start_goals", "plus_bound_coef", "plus_future_32", "plus_kl_to_start_0.5")


def hyperparameters(variant: str) -> dict[str, Any]:
    """The push launch file's GRPO arguments with the variant's overrides."""
    hyper = copy.deepcopy(grpo_hyperparameters(TASKS["push"]))
    for key, value in VARIANTS[variant].items():
        if key == ENV_KWARGS:
            continue
        if key == "rollout_buffer_kwargs":
            hyper[key] = {**hyper.get(key, {}), **value}
        else:
            hyper[key] = value
    return hyper


def env_kwargs(variant: str) -> dict[str, Any]:
    """The training env's arguments: the launch file's for "launch_file" and the "launch_file_*" variants (with its
    training signals), else the task's own; then the variant's overrides. (The evaluation env keeps the task's.)"""
    base = grpo_env_kwargs(TASKS["push"]) if variant.startswith("launch_file") else TASKS["push"].env_kwargs
    return {**base, **VARIANTS[variant].get(ENV_KWARGS, {})}


def run_one(variant: str, seed: int, budget: int, eval_every: int) -> dict[str, Any]:
    """Train one (variant, seed) for ``budget`` env steps; returns its probe curve."""
    import torch as th
    from stable_baselines3.common.callbacks import BaseCallback
    from stable_baselines3.common.env_util import make_vec_env

    import envs  # noqa: F401  (registers the ids)
    from benchmarks.push_potential import BUFFER_CLASSES
    from robot_grpo import GRPO
    from robot_grpo.grpo import DEFAULT_GROUP_SIZE, DEFAULT_N_GROUPS

    th.set_num_threads(1)
    task = TASKS["push"]
    hyper = hyperparameters(variant)
    n_envs = int(hyper.get("group_size", DEFAULT_GROUP_SIZE)) * int(hyper.get("n_groups", DEFAULT_N_GROUPS))
    env = make_vec_env(task.env_id, n_envs=n_envs, seed=seed, env_kwargs=env_kwargs(variant))
    kwargs = dict(hyper)  # hyper stays as VARIANTS wrote it (JSON); a probe's own buffer is named there
    if kwargs.get("rollout_buffer_class") in BUFFER_CLASSES:
        kwargs["rollout_buffer_class"] = BUFFER_CLASSES[kwargs["rollout_buffer_class"]]
    model = GRPO("MultiInputPolicy", env, seed=seed, **kwargs)
    eval_env = make_vec_env(task.env_id, n_envs=EVAL_EPISODES, seed=EVAL_SEED, env_kwargs=task.env_kwargs)
    episode_steps = model.n_steps
    radius_m = float(env.get_attr("distance_threshold", [0])[0])
    start = time.perf_counter()

    def evaluate() -> float:
        eval_env.seed(EVAL_SEED)
        obs = eval_env.reset()
        infos: list[dict[str, Any]] = []
        for _ in range(episode_steps):
            obs, _, _, infos = eval_env.step(model.predict(obs, deterministic=True)[0])
        return float(np.mean([info["is_success"] for info in infos]))

    class Probe(BaseCallback):
        """Rollout statistics at every rollout end; an evaluation every ``eval_every`` env steps."""

        def __init__(self) -> None:
            super().__init__()
            self.moved: list[float] = []
            self.last: dict[str, float] = {}
            self.next_eval = 0
            self.curve: list[dict[str, float]] = []

        def _on_rollout_start(self) -> None:
            if self.model.num_timesteps >= self.next_eval:
                self.next_eval = self.model.num_timesteps + eval_every
                self.record()

        def record(self) -> None:
            point = {"steps": self.model.num_timesteps, "success": evaluate(), "s": time.perf_counter() - start}
            if self.moved:
                point["block_moved"] = float(np.mean(self.moved[-RECENT_ROLLOUTS:]))
            self.curve.append({**point, **self.last})

        def _on_rollout_end(self) -> None:
            buffer = self.model.rollout_buffer
            block_start, goal_start = buffer._start_goals()
            block_end = buffer._grouped(buffer.achieved_next)[-1]
            moved = np.linalg.norm(block_end - block_start[:, None], axis=-1) > radius_m
            self.moved.append(float(moved.mean()))
            flat = buffer.observations.reshape(-1, buffer.obs_dim)
            with th.no_grad():
                mean, _ = self.model.policy.distribution_params(th.as_tensor(flat))
            closest = np.linalg.norm(buffer.observations[..., GRIPPER_TO_BLOCK], axis=-1).min(axis=0)
            goal = buffer.observations[..., buffer.obs_dim - buffer.goal_dim :]  # desired_goal: the last block
            to_goal = np.linalg.norm(buffer.observations[..., GRIPPER_XYZ] - goal, axis=-1)  # [T, n_envs]
            block_to_goal = np.linalg.norm(buffer.achieved_next - goal, axis=-1)  # [T, n_envs], after each step
            stats = self.model._rollout_stats
            self.last = {
                "closest_approach_m": float(closest.mean()),
                "gripper_to_goal_start_m": float(to_goal[0].mean()),
                "gripper_to_goal_end_m": float(to_goal[-1].mean()),
                "block_to_goal_start_m": float(np.linalg.norm(block_start - goal_start, axis=-1).mean()),
                "block_to_goal_end_m": float(block_to_goal[-1].mean()),
                "mean_abs": float(mean.abs().mean()),
                "mean_outside": float((mean.abs() > 1.0).float().mean()),
                "std": float(th.exp(self.model.policy.log_std.detach()).mean()),
                "kept_goals": stats.get("hindsight/kept_goals", 0.0),
                "relabelled_success": stats.get("hindsight/relabelled_success", 0.0),
            }

        def _on_step(self) -> bool:
            return True

    probe = Probe()
    model.learn(budget, callback=probe)
    probe.record()
    return {
        "variant": variant,
        "seed": seed,
        "hyperparameters": hyper,
        "curve": probe.curve,
        "peak_rss_mib": peak_rss_mib(),
    }


def _worker(args: tuple[str, int, int, int]) -> dict[str, Any]:
    return run_one(*args)


def _at(curve: list[dict[str, float]], key: str, index: int) -> str:
    points = [p for p in curve if key in p]
    return f"{points[index][key]:.2f}" if points else "-"


def second_half_success(curve: list[dict[str, float]]) -> float:
    """Mean deterministic success over the evaluations in the second half of the run's env steps: steadier than the
    best or the last of 50-episode evaluations (one episode is 0.02)."""
    half = curve[-1]["steps"] / 2
    return float(np.mean([p["success"] for p in curve if p["steps"] >= half]))


def table(runs: list[dict[str, Any]], tuned: set[int]) -> str:
    """One row per (variant, seed): first and last logged values of each probe quantity."""
    lines = [
        "| variant | seed | env steps | success best / last | success mean, 2nd half | block moved >5 cm: first / "
        "last | closest approach m: first / last | gripper to goal m at the end: first / last (at the start) | "
        "mean abs(mu): first / last | mean outside bounds: last | std: first / last | hindsight goals in use: last | "
        "block to goal m at the end: first / last (at the start) |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for run in runs:
        curve = run["curve"]
        seed = f"{run['seed']} ({'tuned' if run['seed'] in tuned else 'unseen'})"
        lines.append(
            f"| {run['variant']} | {seed} | {curve[-1]['steps']} | {max(p['success'] for p in curve):.2f} / "
            f"{curve[-1]['success']:.2f} | {second_half_success(curve):.2f} | "
            f"{_at(curve, 'block_moved', 0)} / {_at(curve, 'block_moved', -1)} | "
            f"{_at(curve, 'closest_approach_m', 0)} / {_at(curve, 'closest_approach_m', -1)} | "
            f"{_at(curve, 'gripper_to_goal_end_m', 0)} / {_at(curve, 'gripper_to_goal_end_m', -1)} "
            f"({_at(curve, 'gripper_to_goal_start_m', -1)}) | "
            f"{_at(curve, 'mean_abs', 0)} / {_at(curve, 'mean_abs', -1)} | {_at(curve, 'mean_outside', -1)} | "
            f"{_at(curve, 'std', 0)} / {_at(curve, 'std', -1)} | {_at(curve, 'kept_goals', -1)} | "
            f"{_at(curve, 'block_to_goal_end_m', 0)} / {_at(curve, 'block_to_goal_end_m', -1)} "
            f"({_at(curve, 'block_to_goal_start_m', -1)}) |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--variants", nargs="+", default=list(DEFAULT_VARIANTS), choices=list(VARIANTS))
    parser.add_argument("--seeds", nargs="+", type=int, default=[0, 1000])
    parser.add_argument("--tuned-seeds", nargs="*", type=int, default=[0], help="seeds looked at while probing")
    parser.add_argument("--budget", type=int, default=150_000, help="env steps per run")
    parser.add_argument("--eval-every", type=int, default=48_000, help="env steps between evaluations")
    parser.add_argument("--workers", type=int, default=2, help="runs in parallel (one core each)")
    parser.add_argument("--out", default=str(RESULTS / "push_probe"))
    args = parser.parse_args(argv)
    jobs = [(v, s, args.budget, args.eval_every) for v in args.variants for s in args.seeds]
    t0 = time.perf_counter()
    with mp.get_context("spawn").Pool(args.workers, maxtasksperchild=1) as pool:
        runs = pool.map(_worker, jobs, chunksize=1)
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    meta = {
        "command": " ".join(sys.argv),
        "budget": args.budget,
        "tuned_seeds": args.tuned_seeds,
        "total_s": time.perf_counter() - t0,
        "machine": platform.platform(),
        "variants": VARIANTS,
    }
    out.with_suffix(".json").write_text(json.dumps({"meta": meta, "runs": runs}, indent=1))
    md = table(runs, set(args.tuned_seeds))
    out.with_suffix(".md").write_text(
        "# Delayed FetchPush probe: what GRPO's variants do to the block\n\n"
        f"Command: `{meta['command']}` ({meta['total_s']:.0f} s, {args.workers} runs in parallel). Each row's "
        "settings: `VARIANTS` in benchmarks/push_probe.py (overrides of the launch file). 'First' values are "
        f"at the first evaluation after {args.eval_every} env steps; block moved averages the last "
        f"{RECENT_ROLLOUTS} rollouts.\n\n{md}\n"
    )
    print(md)


if __name__ == "__main__":
    main()
