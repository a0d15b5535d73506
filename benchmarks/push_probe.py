"""The push study's probes (docs/benchmarks/push-study.md): short GRPO runs on delayed FetchPush that log what the
success rate hides. One command, three probes (``--probe``):

- ``variants`` (default): each of ``--variants`` (overrides of ``launch/train_delayed_push.yaml``, ``VARIANTS``)
  for ``--budget`` env steps, recording every ``--eval-every`` env steps:

  - ``success``: deterministic success on ``learning.py``'s 50 fixed evaluation episodes;
  - ``block_moved``: share of the training episodes (sampled actions) of the last rollouts that moved the block
    more than the 5 cm success radius, i.e. that give hindsight a goal the start does not already satisfy;
  - ``closest_approach_m``: mean over the last rollout's episodes of the closest gripper-to-block distance (m);
  - ``mean_abs`` / ``mean_outside``: mean |policy mean| over the last rollout's states and the share of mean
    components outside the action bounds [-1, 1] (the env clips actions, so those no longer explore);
  - ``gripper_to_goal_m`` (start -> end): mean gripper-to-goal distance at the first and the last step (m): the
    end falling below the start means the policy brings the gripper, not the block, to the goal;
  - ``std``: the policy's action standard deviation, averaged over the action components;
  - the buffer's hindsight statistics (relabelled goals in use, their success).

- ``directions``: which way the policy pushes the block and which way the goals lie, before and after
  ``--budget`` env steps of the launch file (``benchmarks/push_directions.py``);
- ``fixed-goal``: every goal 12 cm in +y of the block; GRPO, SB3 PPO, a scripted controller and zero actions on
  the same 50 fixed episodes (``benchmarks/push_fixed_goal.py``).

    .venv/bin/python benchmarks/push_probe.py --seeds 0 1000 --budget 150000
    .venv/bin/python benchmarks/push_probe.py --variants launch_file_restart_0.5 --seeds 1000 1001 --budget 1000000
    .venv/bin/python benchmarks/push_probe.py --probe directions --seeds 0 1000 --budget 192000
    .venv/bin/python benchmarks/push_probe.py --probe fixed-goal --seeds 0 --budget 300000 --eval-every 24000

Writes ``--out`` .json and .md (default ``runs/push_study/<probe>``). Each (variant, seed) runs in a fresh process,
``--workers`` at a time.
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

from benchmarks import push_directions, push_fixed_goal  # noqa: E402
from benchmarks.learning import (  # noqa: E402
    EVAL_EPISODES,
    EVAL_SEED,
    TASKS,
    grpo_demonstrations,
    grpo_env_kwargs,
    grpo_hyperparameters,
    peak_rss_mib,
)
from envs.object_approach import GRIPPER_XYZ  # noqa: E402  (the Fetch object task observation, m)

OUT = ROOT / "runs" / "push_study"  # default output folder (the study's own runs are in docs/benchmarks/data/)
RECENT_ROLLOUTS = 5  # rollouts averaged into block_moved
ENV_KWARGS = "env_kwargs"  # a variant's key for env overrides (merged into the task's), not a GRPO argument
DEMONSTRATIONS = "demonstrations"  # a variant's cloned start (merged into the launch file's), not a GRPO argument
# The launch file's arguments for fine-tuning its behaviour-cloned start (2026-12-06). The probes learn from scratch:
# they start from the launch file without these (and without its clone) unless a variant names them.
CLONE_FINE_TUNING_KEYS = ("learning_rate", "beta", "ref_update_interval")
# The clone variants: the launch file's start and fine-tuning, and what changing one piece of it does.
CLONE_FINE_TUNING = {"learning_rate": 1e-4, "beta": 0.5, "ref_update_interval": 0}
GRIPPER_TO_BLOCK = slice(6, 9)  # FetchPush observation: gripper xyz, block xyz, block - gripper, ...

# Overrides of the launch file's hyperparameters (rollout buffer options are merged into the launch file's, not
# replaced). What each found is in docs/benchmarks/push-study.md (the section named in the comment). Since the launch
# file took approach_coef, bound_coef and skip_start_goals (2026-12-02), "launch_file" trains as approach_10 does and
# the "launch_file_*" rows add to it; the other rows train on the task's own env (sparse reward unless they say) and
# the study's tables that predate that change ran with the launch file of their day (dual_clip only).
VARIANTS: dict[str, dict[str, Any]] = {
    # "No contacts": each of DEFAULT_VARIANTS adds one change to the one before it.
    "launch_file": {},
    "skip_start_goals": {"rollout_buffer_kwargs": {"skip_start_goals": True}},
    "plus_bound_coef": {"bound_coef": 1.0, "rollout_buffer_kwargs": {"skip_start_goals": True}},
    "plus_future_32": {
        "bound_coef": 1.0,
        "rollout_buffer_kwargs": {"skip_start_goals": True, "hindsight_strategy": "future", "n_sampled_goal": 32},
    },
    "plus_kl_to_start_0.5": {
        "bound_coef": 1.0,
        "beta": 0.5,
        "ref_update_interval": 0,
        "rollout_buffer_kwargs": {"skip_start_goals": True, "hindsight_strategy": "future", "n_sampled_goal": 32},
    },
    # "Not noise, a trust region or the dual clip": a 4x larger batch fitted less (less noise per update) ...
    "future_32_24_groups_2_epochs": {
        "bound_coef": 1.0,
        "n_groups": 24,
        "n_epochs": 2,
        "rollout_buffer_kwargs": {"skip_start_goals": True, "hindsight_strategy": "future", "n_sampled_goal": 32},
    },
    # ... and trust regions over every row: KL to the rollout policy (refreshed every update), or target_kl.
    "kl_to_rollout_policy_0.5": {
        "bound_coef": 1.0,
        "beta": 0.5,
        "ref_update_interval": 1,
        "rollout_buffer_kwargs": {"skip_start_goals": True},
    },
    "target_kl_0.01": {
        "bound_coef": 1.0,
        "target_kl": 0.01,
        "rollout_buffer_kwargs": {"skip_start_goals": True},
    },
    # "A dense distance term": the env's dense reward (skip_start_goals cannot read it, so it is off) ...
    "dense_reward": {
        "bound_coef": 1.0,
        ENV_KWARGS: {"reward_type": "dense"},
    },
    # ... or the sparse reward plus 10 per metre of block-to-goal distance (success still read from the sparse one),
    # with advantages scaled per group or by the batch's std.
    "distance_10": {
        "bound_coef": 1.0,
        "rollout_buffer_kwargs": {"skip_start_goals": True, "distance_coef": 10.0},
    },
    "distance_10_batch_scale": {
        "bound_coef": 1.0,
        "scale_advantages": "batch",
        "rollout_buffer_kwargs": {"skip_start_goals": True, "distance_coef": 10.0},
    },
    # "A reaching bonus": 10 per metre of new closest gripper-to-block approach (envs.object_approach); the launch
    # file took it.
    "approach_10": {
        "bound_coef": 1.0,
        "rollout_buffer_kwargs": {"skip_start_goals": True},
        ENV_KWARGS: {"approach_coef": 10.0},
    },
    "approach_10_distance_10": {
        "bound_coef": 1.0,
        "scale_advantages": "batch",
        "rollout_buffer_kwargs": {"skip_start_goals": True, "distance_coef": 10.0},
        ENV_KWARGS: {"approach_coef": 10.0},
    },
    # The launch file keeping its exploration: an entropy bonus, or fitting each rollout half as hard.
    "launch_file_ent_0.01": {"ent_coef": 0.01},
    "launch_file_4_epochs": {"n_epochs": 4},
    # More relabelled successes per rollout: 16 "future" goals, or hindsight's importance weights.
    "launch_file_future_16": {"rollout_buffer_kwargs": {"hindsight_strategy": "future", "n_sampled_goal": 16}},
    "launch_file_is_correction": {"rollout_buffer_kwargs": {"is_correction": True}},
    # "The collapse of exploration is a symptom": 16 future goals with a floor at std 0.37 (log -1.0).
    "launch_file_future_16_std_floor_0.37": {
        "min_log_std": -1.0,
        "rollout_buffer_kwargs": {"hindsight_strategy": "future", "n_sampled_goal": 16},
    },
    # A sharper group comparison: 16 members per group, or a shorter horizon (gamma 0.95).
    "launch_file_16_members": {"group_size": 16},
    "launch_file_gamma_0.95": {"gamma": 0.95},
    # "Comparing members from the middle of an episode": half of each rollout's groups start from a state a member
    # of the previous rollout reached (GRPO restart_fraction), alone and with each way of holding what it learned.
    "launch_file_restart_0.5": {"restart_fraction": 0.5},
    "restart_0.5_future_16_std_floor_0.37": {
        "restart_fraction": 0.5,
        "min_log_std": -1.0,
        "rollout_buffer_kwargs": {"hindsight_strategy": "future", "n_sampled_goal": 16},
    },
    "restart_0.5_target_kl_0.01": {"restart_fraction": 0.5, "target_kl": 0.01},
    "restart_0.5_lr_1e-4": {"restart_fraction": 0.5, "learning_rate": 1e-4},
    "restart_0.5_future_16": {
        "restart_fraction": 0.5,
        "rollout_buffer_kwargs": {"hindsight_strategy": "future", "n_sampled_goal": 16},
    },
    # "Paying for the pushing pose": benchmarks/push_potential.py's shaping toward the pose behind the block on the
    # goal line (over the block, not through it), rescored under every hindsight goal; no reaching bonus. Alone,
    # with a std floor, and with advantages scaled by the batch's std instead of each group's.
    "over_block_potential": {"rollout_buffer_class": "PushPotentialBuffer"},
    "over_block_potential_std_floor_0.37": {"rollout_buffer_class": "PushPotentialBuffer", "min_log_std": -1.0},
    "over_block_potential_batch_scale": {"rollout_buffer_class": "PushPotentialBuffer", "scale_advantages": "batch"},
    # "Starts near success": a reverse curriculum with a fixed spread (envs.near_goal_starts): on half the fresh
    # resets the block starts between its drawn start and the goal, the gripper behind it; evaluation on the task's
    # own starts.
    "launch_file_near_goal_0.5": {ENV_KWARGS: {"near_goal_share": 0.5}},
    "launch_file_near_goal_0.5_restart_0.5": {"restart_fraction": 0.5, ENV_KWARGS: {"near_goal_share": 0.5}},
    # "A behaviour-cloned start": the launch file as it is (the scripted push's demonstrations with noise 0.05 while
    # demonstrating, GRPO at std 0.05 with a KL to the clone); cloned from clean demonstrations; fine-tuned at std
    # 0.22 (log-std -1.5).
    "launch_file_clone": {**CLONE_FINE_TUNING, DEMONSTRATIONS: {}},
    "launch_file_clone_clean_demonstrations": {**CLONE_FINE_TUNING, DEMONSTRATIONS: {"action_noise": 0.0}},
    "launch_file_clone_std_0.22": {**CLONE_FINE_TUNING, DEMONSTRATIONS: {"log_std": -1.5}},
}


# What ``--variants`` runs by default (the study's "No contacts" table).
DEFAULT_VARIANTS = ("launch_file", "skip_start_goals", "plus_bound_coef", "plus_future_32", "plus_kl_to_start_0.5")


def hyperparameters(variant: str) -> dict[str, Any]:
    """The push launch file's GRPO arguments with the variant's overrides."""
    hyper = copy.deepcopy(grpo_hyperparameters(TASKS["push"]))
    for key in CLONE_FINE_TUNING_KEYS:
        hyper.pop(key, None)
    for key, value in VARIANTS[variant].items():
        if key in (ENV_KWARGS, DEMONSTRATIONS):
            continue
        if key == "rollout_buffer_kwargs":
            hyper[key] = {**hyper.get(key, {}), **value}
        else:
            hyper[key] = value
    return hyper


def demonstrations(variant: str) -> dict[str, Any] | None:
    """The variant's behaviour-cloned start: the launch file's ``train.demonstrations`` with its overrides (None: the
    probe learns from scratch)."""
    if DEMONSTRATIONS not in VARIANTS[variant]:
        return None
    return {**grpo_demonstrations(TASKS["push"]), **VARIANTS[variant][DEMONSTRATIONS]}


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
    settings = demonstrations(variant)
    if settings is not None:  # cloned before the clock starts: the curve's first point is the clone's own success
        from launch.demonstrations import clone_demonstrations

        clone_demonstrations(settings, task.env_id, env_kwargs(variant), model, seed)
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
        return float(np.mean([bool(info["is_success"]) for info in infos]))  # float64: 45 of 50 is 0.9

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


def _variant_worker(args: tuple[str, int, int, int]) -> dict[str, Any]:
    return run_one(*args)


def _directions_worker(args: tuple[int, int, int]) -> dict[str, Any]:
    return push_directions.run_one(*args)


def _fixed_goal_worker(args: tuple[str, int, int, int]) -> dict[str, Any]:
    return push_fixed_goal.run_learner(*args)


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


# Per probe: default seeds, budget (env steps) and evaluation interval; its table's title and description.
PROBES: dict[str, dict[str, Any]] = {
    "variants": {"seeds": [0, 1000], "budget": 150_000, "eval_every": 48_000},
    "directions": {"seeds": [0, 1000], "budget": 192_000, "eval_every": None},
    "fixed-goal": {"seeds": [0], "budget": 300_000, "eval_every": 24_000},
}
VARIANTS_TITLE = "Delayed FetchPush probe: what GRPO's variants do to the block"


def _variants_description(eval_every: int) -> str:
    return (
        "Each row's settings: `VARIANTS` in benchmarks/push_probe.py (overrides of the launch file). 'First' values "
        f"are at the first evaluation after {eval_every} env steps; block moved averages the last {RECENT_ROLLOUTS} "
        "rollouts."
    )


def probe_names(probe: str, variants: list[str] | None) -> list[str]:
    """The variants (or learners and controllers) a probe runs; ValueError names an unknown one."""
    if probe == "directions":
        if variants:
            raise ValueError("--probe directions trains the launch file: it takes no --variants")
        return []
    known = [*push_fixed_goal.LEARNERS, *push_fixed_goal.CONTROLLERS] if probe == "fixed-goal" else list(VARIANTS)
    names = variants or (known if probe == "fixed-goal" else list(DEFAULT_VARIANTS))
    unknown = sorted(set(names) - set(known))
    if unknown:
        raise ValueError(f"--probe {probe} has no variant {', '.join(unknown)}; it runs {', '.join(known)}")
    return names


def run_probe(args: argparse.Namespace, names: list[str]) -> tuple[list[dict[str, Any]], str, str, str]:
    """Run ``args.probe`` on ``names`` and its seeds; returns (runs, table markdown, title, description)."""
    tuned = set(args.tuned_seeds)
    with mp.get_context("spawn").Pool(args.workers, maxtasksperchild=1) as pool:
        if args.probe == "directions":
            jobs = [(seed, args.budget, args.rounds) for seed in args.seeds]
            runs = pool.map(_directions_worker, jobs, chunksize=1)
            return runs, push_directions.table(runs, tuned), push_directions.TITLE, push_directions.DESCRIPTION
        if args.probe == "fixed-goal":
            learners = [n for n in names if n in push_fixed_goal.LEARNERS]
            jobs = [(name, seed, args.budget, args.eval_every) for name in learners for seed in args.seeds]
            runs = pool.map(_fixed_goal_worker, jobs, chunksize=1) if jobs else []
            runs += [push_fixed_goal.run_controller(n) for n in names if n in push_fixed_goal.CONTROLLERS]
            return runs, push_fixed_goal.table(runs), push_fixed_goal.TITLE, push_fixed_goal.DESCRIPTION
        jobs = [(name, seed, args.budget, args.eval_every) for name in names for seed in args.seeds]
        runs = pool.map(_variant_worker, jobs, chunksize=1)
        return runs, table(runs, tuned), VARIANTS_TITLE, _variants_description(args.eval_every)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--probe", choices=list(PROBES), default="variants", help="what to measure (module docstring)")
    parser.add_argument("--variants", nargs="+", help="variants / learners and controllers (default: the probe's)")
    parser.add_argument("--seeds", nargs="+", type=int, help="default: the probe's (PROBES)")
    parser.add_argument("--tuned-seeds", nargs="*", type=int, default=[0], help="seeds looked at while probing")
    parser.add_argument("--budget", type=int, help="env steps per run (default: the probe's)")
    parser.add_argument("--eval-every", type=int, help="env steps between evaluations (default: the probe's)")
    parser.add_argument("--rounds", type=int, default=5, help="directions: resets of the 48-env VecEnv per measurement")
    parser.add_argument("--workers", type=int, default=2, help="runs in parallel (one core each)")
    parser.add_argument("--out", help="output path without extension (default: runs/push_study/<probe>)")
    args = parser.parse_args(argv)
    defaults = PROBES[args.probe]
    args.seeds = args.seeds or defaults["seeds"]
    args.budget = args.budget or defaults["budget"]
    args.eval_every = args.eval_every or defaults["eval_every"]
    try:
        names = probe_names(args.probe, args.variants)
    except ValueError as error:
        parser.error(str(error))
    t0 = time.perf_counter()
    runs, md, title, description = run_probe(args, names)
    meta = {
        "command": "benchmarks/push_probe.py " + " ".join(argv if argv is not None else sys.argv[1:]),
        "probe": args.probe,
        "budget": args.budget,
        "tuned_seeds": args.tuned_seeds,
        "total_s": time.perf_counter() - t0,
        "machine": platform.platform(),
    }
    if args.probe == "variants":
        meta["variants"] = VARIANTS
    out = Path(args.out or OUT / args.probe)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.with_suffix(".json").write_text(json.dumps({"meta": meta, "runs": runs}, indent=1))
    out.with_suffix(".md").write_text(
        f"# {title}\n\nCommand: `{meta['command']}` ({meta['total_s']:.0f} s, {args.workers} runs in parallel). "
        f"{description}\n\n{md}\n"
    )
    print(md)


if __name__ == "__main__":
    main()
