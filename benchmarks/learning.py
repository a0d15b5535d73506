"""Learning benchmark: GRPO + hindsight vs off-policy learners with HER (SB3 SAC, sb3-contrib TQC) on delayed
Fetch tasks, side by side.

Tasks (``--task``):

- ``easy``: DelayedFetchReach-v0, delay 2, 5 cm (the robot task); target 95%;
- ``hard``: DelayedFetchReach-v0, delay drawn per episode in 1..3, 2 cm; target 95% within 40k env steps;
- ``push``: DelayedFetchPush-v0, delay 2; target 90% within 1M env steps and 45 minutes per seed;
- ``pick``: DelayedFetchPickAndPlace-v0, delay 2; from a clone of the scripted pick-and-place, 200k env steps (aim 80%).

GRPO runs with the hyperparameters of the task's launch file (``launch/train_fetch_reach.yaml``: the defaults,
``launch/train_hard_reach.yaml``, ``launch/train_delayed_push.yaml``, ``launch/train_delayed_pick_and_place.yaml``),
and from its behaviour-cloned start where it has one: the benchmark measures what ``robot-grpo train`` runs. The
off-policy peers (``OFF_POLICY_VARIANTS``) run with rl-zoo3's settings for the task
(``SAC_SETTINGS``: hyperparams/tqc.yml's FetchPush settings on push, her.yml's FetchReach on the reaches), as SAC
(``sac_her``, twin critics) and as TQC (``tqc_her``, rl-zoo's algorithm for FetchPush: 2 critics of 25 quantiles, 2
dropped per critic), and in one smaller configuration that runs faster on a CPU (``sac_her_small``,
``tqc_her_small``: ``SMALL_OFF_POLICY``, 2x256 networks and batches of 256 instead of 3x512 and 2,048). On ``push``
and ``pick`` they get the same wall-clock per seed as GRPO (``--sac-wall-s``, default: the GRPO run's training
seconds for that seed when it ran in the same invocation, else 45 minutes).

Seeds: ``--tuned-seeds`` (the ones looked at while choosing the settings) and ``--unseen-seeds`` (never looked at
before the final run) are reported in separate rows. Every (variant, seed) runs in a fresh process, so each peak
RSS (ru_maxrss) is its own. Every evaluation runs the same 50 fixed episodes (a 50-env eval VecEnv re-seeded with
``EVAL_SEED``), deterministic actions, success = ``is_success`` at the last step (the final policy is also run on
500 held-out episodes, seeds from ``HELD_OUT_SEED``: the stop below selects on the 50); a run stops at its first
evaluation at or above the target, or at its budget. Training seconds exclude the evaluations.

Variants: ``grpo`` (DummyVecEnv, one torch thread), ``grpo_2threads`` (the same training, envs stepped on 2
threads: bit-identical, what GRPO gets from the second core), ``grpo_no_hindsight`` and ``grpo_no_is``
(ablations), and the off-policy peers above.

    .venv/bin/python benchmarks/learning.py --task easy
    .venv/bin/python benchmarks/learning.py --task hard --variants grpo sac_her --tuned-seeds 0 1 --unseen-seeds
    .venv/bin/python benchmarks/learning.py --task push --variants grpo --tuned-seeds 0 --unseen-seeds 1000 1001

Writes benchmarks/results/learning_<task>.json, .md and .png (success against env steps and against training
seconds, one line per run); ``--resummarize`` rewrites the table and figure from the JSON (``--merge`` adds runs
from other JSON files of the same task, e.g. the seeds of a long benchmark run one by one).
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
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # run from a checkout without installing

RESULTS = Path(__file__).resolve().parent / "results"
EVAL_EPISODES = 50
EVAL_SEED = 123_456
HELD_OUT_SEED = 900_000  # the final policy's held-out episodes: seeds from here, apart from EVAL_SEED's 50
HELD_OUT_BATCHES = 10  # x EVAL_EPISODES: 500 held-out episodes (binomial std at 85%: 1.6 points)
GRPO_VARIANTS = ("grpo", "grpo_2threads", "grpo_no_hindsight", "grpo_no_is")
OFF_POLICY_VARIANTS = ("sac_her", "sac_her_small", "tqc_her", "tqc_her_small")
ALL_VARIANTS = (*GRPO_VARIANTS, *OFF_POLICY_VARIANTS)
SECONDS_PER_MINUTE = 60.0
DEFAULT_SAC_WALL_S = 45 * SECONDS_PER_MINUTE
MIB = 1024.0  # ru_maxrss is in KiB on Linux
TRAINING_SIGNAL_KEYS = ("approach_coef",)  # launch-file env keys that shape the reward, not the task


@dataclass(frozen=True)
class Task:
    """One benchmark task: its env, GRPO launch file, budgets, target and evaluation cadence."""

    env_id: str
    env_kwargs: dict[str, Any]
    launch_file: str  # GRPO hyperparameters (train.hyperparameters)
    target: float
    budget: int  # env steps per run (GRPO and SAC alike, unless SAC runs out of wall-clock first)
    sac: str  # key of SAC_SETTINGS
    eval_every: dict[str, int] = field(default_factory=dict)  # env steps between evaluations, per algorithm


TASKS = {
    "easy": Task("DelayedFetchReach-v0", {"delay": 2}, "train_fetch_reach.yaml", 0.95, 32_000, "reach", {"sac": 1_000}),
    "hard": Task(
        "DelayedFetchReach-v0",
        {"delay_range": (1, 3), "distance_threshold": 0.02},
        "train_hard_reach.yaml",
        0.95,
        40_000,
        "reach",
        {"sac": 1_000},
    ),
    "push": Task(
        "DelayedFetchPush-v0", {"delay": 2}, "train_delayed_push.yaml", 0.90, 1_000_000, "push", {"grpo": 20_000}
    ),
    "pick": Task(
        "DelayedFetchPickAndPlace-v0",
        {"delay": 2},
        "train_delayed_pick_and_place.yaml",
        0.80,
        200_000,
        "push",
        {"grpo": 19_200},
    ),
}

# rl-zoo3 (hyperparams/her.yml, tqc.yml): FetchReach with SAC; FetchPush with TQC, here with SAC's twin critics
# (sb3-contrib, TQC's home, is not a dependency). zoo's TimeFeatureWrapper is left out; observations are
# normalized with VecNormalize, rewards are not.
SAC_SETTINGS: dict[str, dict[str, Any]] = {
    "reach": {
        "replay_buffer_kwargs": {"goal_selection_strategy": "future", "n_sampled_goal": 4},
        "buffer_size": 1_000_000,
        "ent_coef": "auto",
        "batch_size": 256,
        "gamma": 0.95,
        "learning_rate": 1e-3,
        "learning_starts": 1000,
        "policy_kwargs": {"net_arch": [64, 64], "n_critics": 1},
    },
    "push": {
        "replay_buffer_kwargs": {"goal_selection_strategy": "future", "n_sampled_goal": 4},
        "buffer_size": 1_000_000,
        "ent_coef": "auto",
        "batch_size": 2048,
        "gamma": 0.95,
        "learning_rate": 1e-3,
        "tau": 0.05,
        "learning_starts": 1000,
        "policy_kwargs": {"net_arch": [512, 512, 512], "n_critics": 2},
    },
}
# The smaller off-policy configuration (``*_small``), for push and pick only (the reach settings are already small):
# rl-zoo's push settings with 2x256 networks and batches of 256, an eighth of the multiply-adds per gradient step
# (one gradient step per env step, as rl-zoo), so a CPU core gets through several times more env steps.
SMALL_OFF_POLICY: dict[str, Any] = {"batch_size": 256, "policy_kwargs": {"net_arch": [256, 256], "n_critics": 2}}


def peak_rss_mib() -> float:
    """This process's peak resident memory so far (MiB; ru_maxrss is in KiB on Linux)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / MIB


def _launch_file(task: Task) -> dict[str, Any]:
    return yaml.safe_load((ROOT / "launch" / task.launch_file).read_text())


def grpo_demonstrations(task: Task) -> dict[str, Any]:
    """The launch file's ``train.demonstrations``, defaults filled in (``episodes`` 0: GRPO starts from scratch)."""
    from launch.jobs import validate_launch

    return validate_launch(_launch_file(task), task.launch_file)["train"]["demonstrations"]


def grpo_hyperparameters(task: Task) -> dict[str, Any]:
    """The GRPO constructor arguments of the task's launch file (empty = the defaults)."""
    return dict(_launch_file(task)["train"].get("hyperparameters") or {})


def grpo_env_kwargs(task: Task) -> dict[str, Any]:
    """The task's env with the training signals GRPO's launch file adds (``TRAINING_SIGNAL_KEYS``): GRPO trains on
    them; SAC+HER keeps the rl-zoo setting (the env's own reward). Success, and so every evaluation, is the same."""
    env = _launch_file(task).get("env") or {}
    return {**task.env_kwargs, **{k: env[k] for k in TRAINING_SIGNAL_KEYS if env.get(k) is not None}}


def build_model(task: Task, variant: str, seed: int) -> Any:
    """The model of one variant, with its training VecEnv."""
    from stable_baselines3 import SAC, HerReplayBuffer
    from stable_baselines3.common.env_util import make_vec_env
    from stable_baselines3.common.vec_env import VecNormalize

    from robot_grpo import GRPO, GroupRolloutBuffer
    from robot_grpo.grpo import DEFAULT_GROUP_SIZE, DEFAULT_N_GROUPS
    from robot_grpo.threaded_vec_env import ThreadedVecEnv

    if variant.startswith("grpo"):
        hyper = grpo_hyperparameters(task)
        n_envs = int(hyper.get("group_size", DEFAULT_GROUP_SIZE)) * int(hyper.get("n_groups", DEFAULT_N_GROUPS))
        threads = {"vec_env_cls": ThreadedVecEnv, "vec_env_kwargs": {"n_threads": 2}} if "2threads" in variant else {}
        env = make_vec_env(task.env_id, n_envs=n_envs, seed=seed, env_kwargs=grpo_env_kwargs(task), **threads)
        if variant == "grpo_no_hindsight":
            hyper["rollout_buffer_class"] = GroupRolloutBuffer
        if variant == "grpo_no_is":
            hyper["rollout_buffer_kwargs"] = {**hyper.get("rollout_buffer_kwargs", {}), "is_correction": False}
        return GRPO("MultiInputPolicy", env, seed=seed, **hyper)
    if variant in OFF_POLICY_VARIANTS:
        single = make_vec_env(task.env_id, n_envs=1, seed=seed, env_kwargs=task.env_kwargs)
        env = VecNormalize(single, norm_reward=False)
        algorithm = tqc_class() if variant.startswith("tqc") else SAC
        settings = off_policy_settings(task, variant)
        return algorithm("MultiInputPolicy", env, replay_buffer_class=HerReplayBuffer, seed=seed, **settings)
    raise ValueError(f"unknown variant {variant!r}; choose from {ALL_VARIANTS}")


def off_policy_settings(task: Task, variant: str) -> dict[str, Any]:
    """The constructor arguments of an off-policy variant on ``task``: rl-zoo's, or the smaller configuration."""
    settings = dict(SAC_SETTINGS[task.sac])
    if variant.endswith("_small"):
        if task.sac != "push":
            raise ValueError(f"{variant} is defined for the push settings (push, pick); the reach settings are small")
        settings.update(SMALL_OFF_POLICY)
    return settings


def tqc_class() -> Any:
    """sb3-contrib's TQC (the ``bench`` extra), with a clear error when it is not installed."""
    try:
        from sb3_contrib import TQC
    except ImportError as err:
        raise SystemExit("tqc_her needs sb3-contrib: pip install -e '.[bench]' (make install has it)") from err
    return TQC


def run_one(
    task_name: str,
    variant: str,
    seed: int,
    budget: int,
    eval_every: int,
    wall_s: float | None,
    to_budget: bool = False,
) -> dict:
    """Train one (variant, seed) until the target, the budget or ``wall_s`` training seconds; returns the curve.
    ``to_budget``: go on past the target to the budget (whether the success holds; steps to the target unchanged)."""
    import torch as th
    from stable_baselines3.common.callbacks import BaseCallback
    from stable_baselines3.common.env_util import make_vec_env

    import envs  # noqa: F401  (registers the ids)

    th.set_num_threads(1)
    task = TASKS[task_name]
    model = build_model(task, variant, seed)
    eval_env = make_vec_env(task.env_id, n_envs=EVAL_EPISODES, seed=EVAL_SEED, env_kwargs=task.env_kwargs)
    episode_steps = int(eval_env.get_attr("spec")[0].max_episode_steps or eval_env.get_attr("max_episode_steps")[0])
    normalizer = model.get_vec_normalize_env()
    curve: list[dict[str, float]] = []
    clock = {"start": time.perf_counter(), "eval": 0.0}
    demo_steps = {"n": 0}  # env steps of the demonstrations GRPO was cloned from: counted in every curve point

    def train_seconds() -> float:
        return time.perf_counter() - clock["start"] - clock["eval"]

    def success_on(first_seed: int) -> float:
        """Deterministic success over the ``EVAL_EPISODES`` episodes seeded ``first_seed``, ``first_seed + 1``, ..."""
        if normalizer is not None:
            normalizer.training = False
        eval_env.seed(first_seed)
        obs = eval_env.reset()
        infos: list[dict[str, Any]] = []
        for _ in range(episode_steps):
            model_obs = normalizer.normalize_obs(obs) if normalizer is not None else obs
            obs, _, _, infos = eval_env.step(model.predict(model_obs, deterministic=True)[0])
        if normalizer is not None:
            normalizer.training = True
        # bools: the env's float32 flags average to float32, and 45 of 50 then reads 0.89999998 < 0.9 (seed 2002's
        # 90% at 143,200 env steps did not count as reaching the 90% target)
        return float(np.mean([bool(info["is_success"]) for info in infos]))

    def evaluate() -> float:
        t0 = time.perf_counter()
        success = success_on(EVAL_SEED)
        clock["eval"] += time.perf_counter() - t0
        curve.append(
            {
                "steps": model.num_timesteps + demo_steps["n"],
                "success": success,
                "train_s": train_seconds(),
                "total_s": time.perf_counter() - clock["start"],
            }
        )
        point = curve[-1]
        print(  # a long run that is stopped still leaves its curve in the log
            f"{task_name} {variant} seed {seed}: {point['steps']} env steps, success {success:.2f}, "
            f"{point['train_s']:.0f} s training",
            file=sys.stderr,
            flush=True,
        )
        return success

    class EvalEvery(BaseCallback):
        """Evaluate when a rollout starts after ``eval_every`` more env steps; stop at the target or wall_s."""

        def __init__(self) -> None:
            super().__init__()
            self.next_eval, self.reached, self.out_of_time = eval_every, False, False

        def _on_rollout_start(self) -> None:
            if self.model.num_timesteps >= self.next_eval and (to_budget or not self.reached):
                self.next_eval = self.model.num_timesteps + eval_every
                self.reached = evaluate() >= task.target and not to_budget

        def _on_step(self) -> bool:
            self.out_of_time = wall_s is not None and train_seconds() >= wall_s
            return not (self.reached or self.out_of_time)

    cloned = None
    if variant.startswith("grpo"):  # the launch file's behaviour-cloned start, as robot-grpo train makes it
        from launch.demonstrations import clone_demonstrations

        cloned = clone_demonstrations(grpo_demonstrations(task), task.env_id, grpo_env_kwargs(task), model, seed)
    if cloned is not None:
        demo_steps["n"] = int(cloned["env_steps"])
        evaluate()
        curve[-1]["phase"] = "clone"  # the clone's own success: a figure of its own, not a GRPO evaluation
    callback = EvalEvery()
    model.learn(budget, callback=callback)
    if not callback.reached:
        evaluate()
    hit = next((p for p in curve if p["success"] >= task.target and p.get("phase") != "clone"), None)
    # The run stops at its first evaluation at or above the target on the same 50 episodes it is judged on, which
    # selects a lucky evaluation; the final policy on episodes it was never judged on says what it does.
    held_out = [success_on(HELD_OUT_SEED + k * EVAL_EPISODES) for k in range(HELD_OUT_BATCHES)]
    return {
        "task": task_name,
        "variant": variant,
        "seed": seed,
        "curve": curve,
        "reached": hit is not None,
        "steps_to_target": hit["steps"] if hit else None,
        "train_s_to_target": hit["train_s"] if hit else None,
        "total_s_to_target": hit["total_s"] if hit else None,
        "final_success": curve[-1]["success"],
        "best_success": max(p["success"] for p in curve if p.get("phase") != "clone"),
        "stopped_by_wall_clock": callback.out_of_time,
        "peak_rss_mib": peak_rss_mib(),
        "demonstrations": cloned,  # the behaviour-cloned start's figures (its env steps are in every curve point)
        "held_out_success": float(np.mean(held_out)),  # the final policy on HELD_OUT_BATCHES x 50 other episodes
        "held_out_episodes": HELD_OUT_BATCHES * EVAL_EPISODES,
    }


# Summary ------------------------------------------------------------------------------------------------------
def _summary(values: list[float]) -> str:
    if not values:
        return "-"
    return f"{statistics.median(values):.0f} ({min(values):.0f}-{max(values):.0f})"


def _fraction(values: list[float]) -> str:
    return f"{statistics.median(values):.2f} ({min(values):.2f}-{max(values):.2f})"


def summarize(runs: list[dict[str, Any]], tuned: set[int]) -> tuple[list[dict[str, Any]], str]:
    """Rows per (variant, seed set): medians over the seeds that reached the target; markdown table."""
    rows = []
    lines = [
        "| variant | seeds | reaching target | env steps | train s | s incl. eval | final success | best success "
        "| median final, all seeds | held-out success, final policy | most env steps run | train s per run "
        "| peak RSS MiB |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for variant in ALL_VARIANTS:
        for seed_set in ("tuned", "unseen"):
            mine = [r for r in runs if r["variant"] == variant and (r["seed"] in tuned) == (seed_set == "tuned")]
            if not mine:
                continue
            ok = [r for r in mine if r["reached"]]
            # a run that stopped at the target counts as at least the target from there on
            finals = [r["final_success"] for r in mine]
            row = {
                "variant": variant,
                "seed_set": seed_set,
                "seeds": sorted(r["seed"] for r in mine),
                "reached": len(ok),
                "steps": [r["steps_to_target"] for r in ok],
                "train_s": [r["train_s_to_target"] for r in ok],
                "total_s": [r["total_s_to_target"] for r in ok],
                "final_success": finals,
                "best_success": [r["best_success"] for r in mine],
                "peak_rss_mib": max(r["peak_rss_mib"] for r in mine),
                "budget_steps": max(r["curve"][-1]["steps"] for r in mine),
                "run_train_s": [r["curve"][-1]["train_s"] for r in mine],  # to the target, the budget or the wall
                "held_out_success": [r["held_out_success"] for r in mine if "held_out_success" in r],
            }
            held_out = _fraction(row["held_out_success"]) if row["held_out_success"] else "-"
            rows.append(row)
            lines.append(
                f"| {variant} | {seed_set} {row['seeds']} | {len(ok)}/{len(mine)} | {_summary(row['steps'])} | "
                f"{_summary(row['train_s'])} | {_summary(row['total_s'])} | {_fraction(finals)} | "
                f"{_fraction(row['best_success'])} | {statistics.median(finals):.2f} | {held_out} | "
                f"{row['budget_steps']} | "
                f"{_summary(row['run_train_s'])} | {row['peak_rss_mib']:.0f} |"
            )
    note = (
        "Figures: median (min-max) over the seeds that reached the target; '-' = none reached it. Final and best "
        "success: over all seeds of the row, at the run's last and best evaluation (a run stops at its first "
        "evaluation at or above the target). Held-out success: the final policy on 500 episodes it was never evaluated "
        "on during training (the stop at the first evaluation at or above the target selects a good draw of the 50 "
        "fixed episodes; '-': a run from before this column). Train s per run: training seconds each run used "
        "(median, min-max), to its target, its budget or its wall-clock limit."
    )
    return rows, "\n".join([*lines, "", note, *ratio_lines(rows)])


def clone_lines(runs: list[dict[str, Any]], tuned: set[int]) -> str:
    """What the behaviour-cloned starts scored before GRPO, per variant and seed set ("" when no run had one)."""
    lines = []
    for variant in ALL_VARIANTS:
        for seed_set in ("tuned", "unseen"):
            mine = [
                r
                for r in runs
                if r["variant"] == variant and r.get("demonstrations") and (r["seed"] in tuned) == (seed_set == "tuned")
            ]
            if not mine:
                continue
            clone = [next(p for p in r["curve"] if p.get("phase") == "clone") for r in mine]
            demos = [r["demonstrations"] for r in mine]
            lines.append(
                f"- {variant}, {seed_set} seeds {sorted(r['seed'] for r in mine)}: cloned from "
                f"{_summary([d['episodes'] for d in demos])} demonstrated episodes "
                f"({_summary([d['successes'] for d in demos])} successful, {_summary([d['env_steps'] for d in demos])} "
                f"env steps, counted in every env-step figure above) in {_summary([p['train_s'] for p in clone])} s; "
                f"the clone's own success before GRPO: {_fraction([p['success'] for p in clone])}"
            )
    if not lines:
        return ""
    return "\nGRPO's behaviour-cloned start (the launch file's train.demonstrations):\n\n" + "\n".join(lines) + "\n"


def ratio_lines(rows: list[dict[str, Any]]) -> list[str]:
    """GRPO vs SAC+HER per seed set, medians of the seeds that reached the target (when both have some)."""
    lines = []
    for seed_set in ("tuned", "unseen"):
        by_name = {row["variant"]: row for row in rows if row["seed_set"] == seed_set}
        peer = by_name.get("sac_her")
        for name in ("grpo", "grpo_2threads"):
            ours = by_name.get(name)
            if not ours or not peer or not ours["steps"] or not peer["steps"]:
                continue
            steps = statistics.median(ours["steps"]) / statistics.median(peer["steps"])
            wall = statistics.median(peer["train_s"]) / statistics.median(ours["train_s"])
            lines.append(
                f"{name} vs sac_her ({seed_set} seeds, medians): {steps:.2f}x the env steps; SAC+HER takes "
                f"{wall:.1f}x {name}'s training seconds."
            )
    return ["", *lines] if lines else []


def plot(runs: list[dict[str, Any]], tuned: set[int], title: str, path: Path) -> None:
    """Success against env steps and against training seconds, one line per run (dashed: unseen seeds)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(13, 4.8))
    variants = [v for v in ALL_VARIANTS if any(r["variant"] == v for r in runs)]
    for i, variant in enumerate(variants):
        labelled = False
        for run in (r for r in runs if r["variant"] == variant):
            style = "-" if run["seed"] in tuned else "--"
            label = None if labelled else variant
            labelled = True
            success = [p["success"] for p in run["curve"]]
            axes[0].plot([p["steps"] for p in run["curve"]], success, style, color=f"C{i}", alpha=0.75, label=label)
            axes[1].plot([p["train_s"] for p in run["curve"]], success, style, color=f"C{i}", alpha=0.75)
    target = TASKS[runs[0]["task"]].target
    for ax, xlabel in zip(axes, ("env steps", "training seconds (evaluations excluded)"), strict=True):
        ax.axhline(target, color="grey", linestyle=":", linewidth=1)
        ax.set_xlabel(xlabel)
        ax.set_ylabel(f"deterministic success ({EVAL_EPISODES} fixed episodes)")
        ax.set_ylim(-0.02, 1.02)
    axes[1].set_xscale("log")
    axes[0].legend(loc="lower right")
    fig.suptitle(f"{title}: one line per seed (solid: tuned seeds, dashed: unseen seeds)")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def write_outputs(task_name: str, runs: list[dict[str, Any]], meta: dict[str, Any], name: str) -> str:
    tuned = set(meta["tuned_seeds"])
    rows, table = summarize(runs, tuned)
    task = TASKS[task_name]
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / f"{name}.json").write_text(json.dumps({"meta": meta, "summary": rows, "runs": runs}, indent=1))
    title = f"{task.env_id} {task.env_kwargs}"
    signals = {k: v for k, v in meta.get("grpo_env_kwargs", {}).items() if k in TRAINING_SIGNAL_KEYS}
    trained_on = f" GRPO trains with {signals} (success, and so every evaluation, is unchanged)." if signals else ""
    header = (
        f"# Learning benchmark ({task_name}): {title}\n\nTarget {task.target:.0%} deterministic success over "
        f"{EVAL_EPISODES} fixed episodes; budget {task.budget} env steps. GRPO settings: launch/{task.launch_file}."
        f"{trained_on}\n\nCommands: {'; '.join(f'`{c}`' for c in meta['commands'])}\n\n"
    )
    (RESULTS / f"{name}.md").write_text(header + table + "\n" + clone_lines(runs, tuned))
    plot(runs, tuned, f"{task_name}: {title}", RESULTS / f"{name}.png")
    return table


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--task", choices=sorted(TASKS), required=True)
    parser.add_argument("--variants", nargs="+", default=["grpo", "grpo_2threads", "sac_her"], choices=ALL_VARIANTS)
    parser.add_argument("--tuned-seeds", nargs="*", type=int, default=[0, 1, 2, 3, 4])
    parser.add_argument("--unseen-seeds", nargs="*", type=int, default=[1000, 1001, 1002, 1003, 1004])
    parser.add_argument("--budget", type=int, help="env steps per run (default: the task's)")
    parser.add_argument("--eval-every", type=int, help="env steps between evaluations (default: every GRPO update)")
    parser.add_argument(
        "--sac-wall-s", type=float, help="training seconds per seed of the off-policy peers (push default: GRPO's)"
    )
    parser.add_argument(
        "--to-budget", action="store_true", help="train past the target to the budget (does the success hold?)"
    )
    parser.add_argument("--name", help="output file stem in benchmarks/results/ (default learning_<task>)")
    parser.add_argument("--resummarize", action="store_true", help="rewrite the table and plot from the JSON")
    parser.add_argument("--merge", nargs="*", default=[], help="JSON results of the same task to add (--resummarize)")
    args = parser.parse_args()
    task = TASKS[args.task]
    name = args.name or f"learning_{args.task}"
    if args.resummarize:
        saved = json.loads((RESULTS / f"{name}.json").read_text())
        for extra in args.merge:
            other = json.loads(Path(extra).read_text())
            saved["runs"] += other["runs"]
            saved["meta"]["commands"] += other["meta"]["commands"]
            saved["meta"]["tuned_seeds"] = sorted(set(saved["meta"]["tuned_seeds"]) | set(other["meta"]["tuned_seeds"]))
        print(write_outputs(args.task, saved["runs"], saved["meta"], name))
        return

    from robot_grpo.grpo import DEFAULT_GROUP_SIZE, DEFAULT_N_GROUPS

    hyper = grpo_hyperparameters(task)
    update_steps = int(hyper.get("group_size", DEFAULT_GROUP_SIZE)) * int(hyper.get("n_groups", DEFAULT_N_GROUPS)) * 50
    runs: list[dict[str, Any]] = []
    grpo_train_s: dict[int, float] = {}
    ctx = mp.get_context("spawn")
    for variant, seed in [(v, s) for v in args.variants for s in [*args.tuned_seeds, *args.unseen_seeds]]:
        off_policy = variant in OFF_POLICY_VARIANTS
        algo = "sac" if off_policy else "grpo"
        eval_every = args.eval_every or task.eval_every.get(algo, update_steps)
        wall_s = None
        if off_policy and args.task in ("push", "pick"):
            wall_s = args.sac_wall_s or grpo_train_s.get(seed, DEFAULT_SAC_WALL_S)
        elif off_policy and args.sac_wall_s:
            wall_s = args.sac_wall_s
        with ctx.Pool(1, maxtasksperchild=1) as pool:
            budget = args.budget or task.budget
            run = pool.apply(run_one, (args.task, variant, seed, budget, eval_every, wall_s, args.to_budget))
        runs.append(run)
        if variant == "grpo":
            grpo_train_s[seed] = run["curve"][-1]["train_s"]
        print(
            f"{args.task} {variant:18s} seed {seed}: reached={run['reached']} steps={run['steps_to_target']} "
            f"train_s={run['train_s_to_target']} final={run['final_success']:.2f} rss={run['peak_rss_mib']:.0f}MiB",
            flush=True,
        )
    meta = {
        "task": args.task,
        "env_id": task.env_id,
        "env_kwargs": task.env_kwargs,
        "grpo_env_kwargs": grpo_env_kwargs(task),  # with the launch file's training signals (TRAINING_SIGNAL_KEYS)
        "grpo_hyperparameters": hyper,
        "sac_settings": SAC_SETTINGS[task.sac],
        "small_off_policy_settings": SMALL_OFF_POLICY if task.sac == "push" else None,
        "eval_episodes": EVAL_EPISODES,
        "target": task.target,
        "tuned_seeds": args.tuned_seeds,
        "unseen_seeds": args.unseen_seeds,
        "machine": platform.platform(),
        "python": platform.python_version(),
        "commands": [" ".join(["benchmarks/learning.py", *sys.argv[1:]])],
    }
    print(write_outputs(args.task, runs, meta, name))


if __name__ == "__main__":
    main()
