"""Learner seconds per 1,000 env steps: this checkout's GRPO update vs a reference commit's, side by side in one run.

The learner's share of an update is everything after the rollout: scoring the rollout (normalizer, log-probs,
hindsight relabelling, advantages) and the clipped-ratio epochs. The reference commit is unpacked into a temp dir
(``git archive``); each path runs in its own child process on one thread (``torch.set_num_threads(1)``) with GRPO's
defaults on DelayedFetchReach k=2 (6 groups x 8 members x 50 steps = 2,400 env steps per update), the same seed,
and times only the learner part of each update (rollouts are not timed). On the CPU the time is the process's CPU
time (one thread: what the learner used of its core, much less distorted than wall time when other jobs load the
machine); on CUDA it is wall time after a synchronize. Children alternate (reference, this, reference, this, ...),
so load from other jobs hits both alike; the figure is the median over the counted updates of all repeats. The
final weights of both paths are compared (max absolute difference over the policy's parameters): the update is the
same computation, so they agree to float tolerance.

``--groups`` and ``--minibatches`` measure a larger update, e.g. what 64 workers bring (128 groups, 51,200 env
steps) with the batch size grown so that an epoch keeps its number of minibatches (rsl_rl's ``num_mini_batches``).

    nice -n 10 .venv/bin/python benchmarks/learner_speed.py [--reference db5d0ad] [--updates 4] [--repeats 2]
        [--device cpu|cuda|auto]   (the device of this checkout's learner; the reference always runs on the CPU)
        [--groups 128 --minibatches 11]

Writes benchmarks/results/learner_speed.json and .md.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results"
DEFAULT_REFERENCE = "db5d0ad"  # the last commit before this learner work (issue 34)
ENV_ID = "DelayedFetchReach-v0"
ENV_KWARGS = {"delay": 2}
SEED = 0
WARMUP_UPDATES = 1  # the first update pays for allocations and first calls; not counted
STEPS_PER_KILO = 1000.0
DEFAULT_GROUPS = 6  # GRPO's n_groups


def learner_clock(device: str) -> Any:
    """CPU time of this process on the CPU (one thread), wall time on an accelerator."""
    return time.perf_counter if device.startswith("cuda") else time.process_time


def child(updates: int, device: str, n_groups: int, minibatches: int | None, weights_out: Path) -> dict[str, Any]:
    """Run ``updates`` GRPO updates with the code on ``sys.path``; time the learner part of each."""
    import functools

    import torch as th
    from stable_baselines3.common.env_util import make_vec_env

    import envs  # noqa: F401  (registers the ids)
    from deploy.export.rollouts import make_env
    from robot_grpo.grpo import GRPO

    th.set_num_threads(1)
    from robot_grpo.grpo import DEFAULT_GROUP_SIZE

    n_envs = DEFAULT_GROUP_SIZE * n_groups
    vec_env = make_vec_env(functools.partial(make_env, ENV_ID, ENV_KWARGS), n_envs=n_envs, seed=SEED)
    batch = {}
    if minibatches is not None:  # rows: the original goal plus 8 hindsight goals per step ("final", the default)
        batch = {"batch_size": -(-9 * n_envs * 50 // minibatches)}
    model = GRPO("MultiInputPolicy", vec_env, seed=SEED, device=device, n_groups=n_groups, **batch)
    clock = learner_clock(str(model.device))
    steps_per_update = model.n_envs * model.n_steps
    total, callback = model._setup_learn(updates * steps_per_update, None)
    scoring: list[float] = []
    score = model._score_rollout

    def timed_score(*args: Any) -> None:
        start = clock()
        score(*args)
        scoring.append(clock() - start)

    model._score_rollout = timed_score  # type: ignore[method-assign]
    learner_s = []
    for _ in range(updates):
        model.collect_rollouts(model.env, callback, model.rollout_buffer)
        model._update_current_progress_remaining(model.num_timesteps, total)
        start = clock()
        model.train()
        if model.device.type == "cuda":
            th.cuda.synchronize()
        learner_s.append(clock() - start + scoring[-1])
    th.save({k: v.detach().cpu() for k, v in model.policy.named_parameters()}, weights_out)
    vec_env.close()
    floor_s = arithmetic_floor(model, clock)
    return {
        "learner_s": learner_s,
        "floor_s": floor_s,
        "steps_per_update": steps_per_update,
        "device": str(model.device),
    }


def arithmetic_floor(model: Any, clock: Any) -> float:
    """Seconds of the update's unavoidable arithmetic: the network's forward and backward on every minibatch of
    every epoch (same rows, same shapes), with no loss terms, no optimizer, no checks and no logging."""
    import torch as th

    rows = model.rollout_buffer.samples.observations
    inputs = model.policy.obs_normalizer(rows).detach()
    net = model.policy.mean_net
    start = clock()
    for _ in range(model.n_epochs):
        for first in range(0, len(inputs), model.batch_size):
            net(inputs[first : first + model.batch_size]).sum().backward()
    if model.device.type == "cuda":
        th.cuda.synchronize()
    return clock() - start


def unpack(reference: str, into: Path) -> None:
    archive = subprocess.run(["git", "archive", reference], cwd=ROOT, capture_output=True, check=True).stdout
    subprocess.run(["tar", "-x", "-C", str(into)], input=archive, check=True)


def run_child(code_root: Path, args: argparse.Namespace, device: str, weights_out: Path) -> dict[str, Any]:
    env = {**os.environ, "PYTHONPATH": str(code_root)}
    command = [
        sys.executable,
        str(Path(__file__).resolve()),
        "--child",
        *("--updates", str(args.updates), "--device", device, "--groups", str(args.groups)),
        *(() if args.minibatches is None else ("--minibatches", str(args.minibatches))),
    ]
    done = subprocess.run(
        [*command, "--weights-out", str(weights_out)], env=env, cwd=code_root, capture_output=True, text=True
    )
    if done.returncode != 0:
        raise RuntimeError(f"child in {code_root} failed:\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def markdown(r: dict[str, Any]) -> str:
    ref, new = r["paths"]["reference"], r["paths"]["this"]
    lines = [
        f"# Learner seconds per 1k env steps (one run; {r['cpus']} cores shared with other jobs, load avg "
        f"{r['load_start']:.2f} at start, {r['load_end']:.2f} at end)",
        "",
        f"Command: `{r['command']}`",
        "",
        f"GRPO defaults on {ENV_ID} k=2 ({r['groups']} groups of 8, batch size {r['batch']}), "
        f"{new['steps_per_update']} env steps per update, one torch thread; CPU seconds of the learner (wall "
        f"seconds on CUDA); median over {r['counted_updates']} counted updates x {r['repeats']} alternating repeats "
        "per path.",
        "",
        "| path | device | learner s per update | learner s per 1k env steps | speed-up |",
        "|---|---|---|---|---|",
        f"| reference ({r['reference']}) | {ref['device']} | {ref['update_s']:.3f} | {ref['per_kilo_s']:.4f} | 1.00x |",
        f"| this checkout | {new['device']} | {new['update_s']:.3f} | {new['per_kilo_s']:.4f} | {r['speedup']:.2f}x |",
        "",
        f"Arithmetic floor (this checkout's network, forward + backward on every minibatch of every epoch, nothing "
        f"else): {new['floor_s']:.3f} s per update = {new['floor_s'] * STEPS_PER_KILO / new['steps_per_update']:.4f} "
        f"s per 1k env steps, {ref['update_s'] / new['floor_s']:.2f}x below the reference's whole update: the most any "
        "rewrite of the same computation on this device could gain.",
        "",
        f"Final weights after {r['updates']} updates: max absolute difference {r['max_abs_weight_diff']:.2e} "
        f"(largest parameter {r['max_abs_weight']:.2f}).",
    ]
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reference", default=DEFAULT_REFERENCE)
    parser.add_argument("--updates", type=int, default=4)
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--groups", type=int, default=DEFAULT_GROUPS, help="groups of 8 per update (GRPO's default: 6)")
    parser.add_argument("--minibatches", type=int, default=None, help="minibatches per epoch (default: batch 2048)")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--weights-out", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(child(args.updates, args.device, args.groups, args.minibatches, args.weights_out)))
        return
    if args.updates <= WARMUP_UPDATES:
        raise SystemExit(f"--updates must be > {WARMUP_UPDATES} (the first update is a warm-up)")
    import torch as th

    load_start = os.getloadavg()[0]
    times: dict[str, list[float]] = {"reference": [], "this": []}
    floors: dict[str, list[float]] = {"reference": [], "this": []}
    meta: dict[str, dict[str, Any]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        ref_root = Path(tmp) / "reference"
        ref_root.mkdir()
        unpack(args.reference, ref_root)
        for repeat in range(args.repeats):
            for name, root, device in (("reference", ref_root, "cpu"), ("this", ROOT, args.device)):
                out = run_child(root, args, device, Path(tmp) / f"{name}.pt")
                times[name] += out["learner_s"][WARMUP_UPDATES:]
                floors[name].append(out["floor_s"])
                meta[name] = {"steps_per_update": out["steps_per_update"], "device": out["device"]}
                print(f"repeat {repeat} {name}: {out['learner_s']}", flush=True)
        ref_w = th.load(Path(tmp) / "reference.pt")
        new_w = th.load(Path(tmp) / "this.pt")
    diff = max(float((ref_w[k] - new_w[k]).abs().max()) for k in ref_w)
    paths = {}
    for name, values in times.items():
        update_s = statistics.median(values)
        paths[name] = {
            **meta[name],
            "update_s": update_s,
            "per_kilo_s": update_s * STEPS_PER_KILO / meta[name]["steps_per_update"],
            "all_s": values,
            "floor_s": statistics.median(floors[name]),
        }
    results = {
        "command": "benchmarks/learner_speed.py " + " ".join(sys.argv[1:]),
        "cpus": os.cpu_count(),
        "load_start": load_start,
        "load_end": os.getloadavg()[0],
        "reference": args.reference,
        "updates": args.updates,
        "counted_updates": args.updates - WARMUP_UPDATES,
        "repeats": args.repeats,
        "groups": args.groups,
        "batch": "2048" if args.minibatches is None else f"rows / {args.minibatches}",
        "paths": paths,
        "speedup": paths["reference"]["update_s"] / paths["this"]["update_s"],
        "max_abs_weight_diff": diff,
        "max_abs_weight": max(float(v.abs().max()) for v in ref_w.values()),
    }
    RESULTS.mkdir(exist_ok=True)
    suffix = "" if args.device == "cpu" else f"_{args.device}"
    suffix += "" if args.groups == DEFAULT_GROUPS else f"_{args.groups}_groups"
    (RESULTS / f"learner_speed{suffix}.json").write_text(json.dumps(results, indent=2))
    (RESULTS / f"learner_speed{suffix}.md").write_text(markdown(results))
    print(markdown(results))


if __name__ == "__main__":
    main()
