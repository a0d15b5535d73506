"""Learner seconds per 1,000 env steps: this checkout's GRPO update vs a reference commit's, side by side in one run.

The learner's share of an update is everything after the rollout: scoring the rollout (normalizer, log-probs,
hindsight relabelling, advantages) and the clipped-ratio epochs. The reference commit is unpacked into a temp dir
(``git archive``); each path runs in its own child process on one thread (``torch.set_num_threads(1)``) with GRPO's
defaults on DelayedFetchReach k=2 (6 groups x 8 members x 50 steps = 2,400 env steps per update), the same seed,
and times only the learner part of each update (rollouts are not timed). Children alternate (reference, this,
reference, this, ...), so a burst of load from other jobs hits both alike; the figure is the median over the
counted updates of all repeats. The final weights of both paths are compared (max absolute difference): the
update is the same computation, so they agree to float tolerance.

    nice -n 10 .venv/bin/python benchmarks/learner_speed.py [--reference db5d0ad] [--updates 4] [--repeats 2]
        [--device cpu|cuda|auto]   (the device of this checkout's learner; the reference always runs on the CPU)

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


def child(updates: int, device: str, weights_out: Path) -> dict[str, Any]:
    """Run ``updates`` GRPO updates with the code on ``sys.path``; time the learner part of each."""
    import functools

    import torch as th
    from stable_baselines3.common.env_util import make_vec_env

    import envs  # noqa: F401  (registers the ids)
    from deploy.export.rollouts import make_env
    from robot_grpo.grpo import GRPO

    th.set_num_threads(1)
    vec_env = make_vec_env(functools.partial(make_env, ENV_ID, ENV_KWARGS), n_envs=48, seed=SEED)
    model = GRPO("MultiInputPolicy", vec_env, seed=SEED, device=device)
    steps_per_update = model.n_envs * model.n_steps
    total, callback = model._setup_learn(updates * steps_per_update, None)
    scoring: list[float] = []
    score = model._score_rollout

    def timed_score(*args: Any) -> None:
        start = time.perf_counter()
        score(*args)
        scoring.append(time.perf_counter() - start)

    model._score_rollout = timed_score  # type: ignore[method-assign]
    learner_s = []
    for _ in range(updates):
        model.collect_rollouts(model.env, callback, model.rollout_buffer)
        model._update_current_progress_remaining(model.num_timesteps, total)
        start = time.perf_counter()
        model.train()
        if model.device.type == "cuda":
            th.cuda.synchronize()
        learner_s.append(time.perf_counter() - start + scoring[-1])
    th.save({k: v.detach().cpu() for k, v in model.policy.state_dict().items()}, weights_out)
    vec_env.close()
    return {"learner_s": learner_s, "steps_per_update": steps_per_update, "device": str(model.device)}


def unpack(reference: str, into: Path) -> None:
    archive = subprocess.run(["git", "archive", reference], cwd=ROOT, capture_output=True, check=True).stdout
    subprocess.run(["tar", "-x", "-C", str(into)], input=archive, check=True)


def run_child(code_root: Path, updates: int, device: str, weights_out: Path) -> dict[str, Any]:
    env = {**os.environ, "PYTHONPATH": str(code_root)}
    args = [sys.executable, str(Path(__file__).resolve()), "--child", "--updates", str(updates), "--device", device]
    done = subprocess.run(
        [*args, "--weights-out", str(weights_out)], env=env, cwd=code_root, capture_output=True, text=True
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
        f"GRPO defaults on {ENV_ID} k=2, {new['steps_per_update']} env steps per update, one torch thread; median "
        f"over {r['counted_updates']} counted updates x {r['repeats']} alternating repeats per path.",
        "",
        "| path | device | learner s per update | learner s per 1k env steps | speed-up |",
        "|---|---|---|---|---|",
        f"| reference ({r['reference']}) | {ref['device']} | {ref['update_s']:.3f} | {ref['per_kilo_s']:.4f} | 1.00x |",
        f"| this checkout | {new['device']} | {new['update_s']:.3f} | {new['per_kilo_s']:.4f} | {r['speedup']:.2f}x |",
        "",
        f"Final weights after {r['updates']} updates: max absolute difference {r['max_abs_weight_diff']:.2e} "
        f"(largest weight {r['max_abs_weight']:.2f}).",
    ]
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reference", default=DEFAULT_REFERENCE)
    parser.add_argument("--updates", type=int, default=4)
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--weights-out", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(child(args.updates, args.device, args.weights_out)))
        return
    if args.updates <= WARMUP_UPDATES:
        raise SystemExit(f"--updates must be > {WARMUP_UPDATES} (the first update is a warm-up)")
    import torch as th

    load_start = os.getloadavg()[0]
    times: dict[str, list[float]] = {"reference": [], "this": []}
    meta: dict[str, dict[str, Any]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        ref_root = Path(tmp) / "reference"
        ref_root.mkdir()
        unpack(args.reference, ref_root)
        for repeat in range(args.repeats):
            for name, root, device in (("reference", ref_root, "cpu"), ("this", ROOT, args.device)):
                out = run_child(root, args.updates, device, Path(tmp) / f"{name}.pt")
                times[name] += out["learner_s"][WARMUP_UPDATES:]
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
        "paths": paths,
        "speedup": paths["reference"]["update_s"] / paths["this"]["update_s"],
        "max_abs_weight_diff": diff,
        "max_abs_weight": max(float(v.abs().max()) for v in ref_w.values()),
    }
    RESULTS.mkdir(exist_ok=True)
    suffix = "" if args.device == "cpu" else f"_{args.device}"
    (RESULTS / f"learner_speed{suffix}.json").write_text(json.dumps(results, indent=2))
    (RESULTS / f"learner_speed{suffix}.md").write_text(markdown(results))
    print(markdown(results))


if __name__ == "__main__":
    main()
