"""Scale-out benchmark, side by side in one run: threaded rollouts vs Ray rollout workers, and PBT vs one learner.

Part 1, rollouts (DelayedFetchReach k=2, GRPO defaults: 6 groups of 8, 50 steps = 2,400 env steps per update,
the same seed everywhere): the threaded path (48 envs on 2 threads) and ``DistributedGRPO`` with 1 and 2 Ray
workers on a local Ray with this machine's 2 cores. Per update: the rollout (from rollout start to the last
env step's data in the learner), the whole update (rollout + scoring + training), Ray's share (put, per-call
round trips, result transfer: the collect wall minus the workers' own compute). Whether 1 and 2 workers end
with bit-identical weights is checked on Fetch here (the tests check it on PointReach).

Part 2, projection to 4-64 workers on separate machines, from the measured per-group compute, per-call
overhead, learner time and payload sizes; the model and its assumptions are printed with the table.

Part 3, population (the hard reach setting: delay drawn in 1..3 per episode, distance_threshold 0.02 m): PBT with
8 members (``robot_grpo.scale.population``) vs one learner with GRPO's defaults given the same total env steps;
success of the best member / the learner at equal env steps and at equal wall time.

Writes benchmarks/results/scale_out.json and .md and reports peak memory (this process and its Ray processes).

    nice -n 10 .venv/bin/python benchmarks/scale_out.py [--updates 4] [--members 8] [--member-steps 12000]
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import json
import math
import os
import platform
import resource
import shutil
import statistics
import sys
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np

os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")  # the local Ray listens on loopback only

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a checkout without installing

import ray
import torch as th
from stable_baselines3.common.callbacks import BaseCallback
from stable_baselines3.common.env_util import make_vec_env

import envs  # noqa: F401  (registers the ids)
from deploy.export.rollouts import make_env
from launch.job_population import MemberBuilder, SuccessEvaluator
from robot_grpo.grpo import DEFAULT_GROUP_SIZE, DEFAULT_N_GROUPS, GRPO
from robot_grpo.scale.distributed_grpo import DistributedGRPO
from robot_grpo.scale.diversity import probe_states
from robot_grpo.scale.pool import RolloutWorkerPool
from robot_grpo.scale.population import DEFAULT_MIN_PAIR_JS, Mutations, PopulationConfig, train_population
from robot_grpo.threaded_vec_env import ThreadedVecEnv

RESULTS = Path(__file__).resolve().parent / "results"
RUNS = Path(__file__).resolve().parents[1] / "runs"  # Tune's experiment folder (git-ignored)
ENV_ID = "DelayedFetchReach-v0"
ROLLOUT_ENV_KWARGS = {"delay": 2}
HARD_ENV_KWARGS = {"delay_range": (1, 3), "distance_threshold": 0.02}
EPISODE_STEPS = 50
SEED = 0
CPUS = 2  # this machine's cores: PBT runs two members at a time
ROLLOUT_RAY_CPUS = 3  # logical CPUs while the 1- and 2-worker pools exist side by side (one runs at a time)
ENV_THREADS = 2
WARMUP_UPDATES = 1  # the first round pays for worker start-up and first fetches; not counted
LATENCY_CALLS = 200
PAYLOAD_REPEATS = 20
SAMPLE_S = 0.5  # memory sampler period
# Projection assumptions (not measured here: this machine has no second host)
LINK_BANDWIDTH_BPS = 125e6  # 1 Gbit/s Ethernet between machines, bytes per second
LINK_RTT_S = 0.2e-3  # LAN round trip added to every call
PROJECTED_WORKERS = (1, 2, 4, 8, 16, 32, 64)
EVAL_EPISODES = 30
PROBE_STATES = 64
PROBE_SEED = 2_000_000


# Memory ---------------------------------------------------------------------------------------------------
PAGE_BYTES = os.sysconf("SC_PAGE_SIZE")


def _self_and_descendants() -> list[int]:
    """This process and every process below it (from /proc: pid -> parent pid)."""
    parents: dict[int, int] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            with contextlib.suppress(OSError, IndexError, ValueError):  # a process that just ended
                parents[int(entry.name)] = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
    family, frontier = [os.getpid()], [os.getpid()]
    while frontier:
        frontier = [pid for pid, parent in parents.items() if parent in frontier]
        family += frontier
    return family


def _rss_bytes(pid: int) -> int:
    with contextlib.suppress(OSError, IndexError, ValueError):
        return int(Path(f"/proc/{pid}/statm").read_text().split()[1]) * PAGE_BYTES
    return 0


class PeakRss:
    """Samples the RSS of this process plus all its descendants (the local Ray's GCS, raylet and workers)."""

    def __init__(self) -> None:
        self.peak_total = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            self.peak_total = max(self.peak_total, sum(_rss_bytes(pid) for pid in _self_and_descendants()))
            self._stop.wait(SAMPLE_S)

    def __enter__(self) -> PeakRss:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()


# Part 1: rollouts -----------------------------------------------------------------------------------------
class RolloutTimer(BaseCallback):
    """Per update: rollout seconds (rollout start -> the last step's data in the learner) and Ray's collect stats."""

    def __init__(self) -> None:
        super().__init__()
        self.rollout_s: list[float] = []
        self.collect: list[dict[str, float]] = []
        self._start = 0.0
        self._last_step = 0.0

    def _on_rollout_start(self) -> None:
        self._start = time.perf_counter()

    def _on_step(self) -> bool:
        self._last_step = time.perf_counter()
        return True

    def _on_rollout_end(self) -> None:
        self.rollout_s.append(self._last_step - self._start)
        workers = getattr(self.model, "workers", None)
        if workers is not None:
            s = workers.last_stats
            self.collect.append({"wall_s": s.wall_s, "put_s": s.put_s, "compute_s": s.compute_s})


def _median_after_warmup(values: list[float]) -> float:
    return statistics.median(values[WARMUP_UPDATES:])


ROLLOUT_VARIANTS = {"threaded": 0, "ray_1": 1, "ray_2": 2}  # name -> Ray workers (0: the threaded path)
UPDATE_STEPS = DEFAULT_GROUP_SIZE * DEFAULT_N_GROUPS * EPISODE_STEPS


def threaded_envs(env_kwargs: dict[str, Any]) -> Any:
    """GRPO's default number of envs of ``ENV_ID`` with ``env_kwargs``, stepped on ``ENV_THREADS`` threads."""
    return make_vec_env(
        functools.partial(make_env, ENV_ID, env_kwargs),
        n_envs=DEFAULT_GROUP_SIZE * DEFAULT_N_GROUPS,
        seed=SEED,
        vec_env_cls=ThreadedVecEnv,
        vec_env_kwargs={"n_threads": ENV_THREADS},
    )


def build_variant(workers: int) -> tuple[GRPO, Any]:
    """GRPO with the defaults and the same seed: threaded (workers=0) or on a pool of Ray workers."""
    factory = functools.partial(make_env, ENV_ID, ROLLOUT_ENV_KWARGS)
    if workers == 0:
        vec_env = threaded_envs(ROLLOUT_ENV_KWARGS)
        return GRPO("MultiInputPolicy", vec_env, seed=SEED), vec_env.close
    pool = RolloutWorkerPool(factory, DEFAULT_GROUP_SIZE, workers)
    return DistributedGRPO("MultiInputPolicy", pool, seed=SEED), pool.shutdown


def run_rollouts(updates: int) -> dict[str, dict[str, Any]]:
    """One update of every variant per round, ``updates`` rounds (interleaved: a burst of load from other jobs
    hits all variants alike); medians after the warm-up rounds, and the final weights."""
    built = {name: build_variant(workers) for name, workers in ROLLOUT_VARIANTS.items()}
    timers = {name: RolloutTimer() for name in built}
    update_s: dict[str, list[float]] = {name: [] for name in built}
    for _ in range(updates):
        for name, (model, _) in built.items():
            start = time.perf_counter()
            model.learn(UPDATE_STEPS, callback=timers[name], reset_num_timesteps=False)
            update_s[name].append(time.perf_counter() - start)
    out = {}
    for name, (model, close) in built.items():
        r: dict[str, Any] = {
            "variant": name,
            "updates": updates,
            "counted_updates": updates - WARMUP_UPDATES,
            "env_steps_per_update": UPDATE_STEPS,
            "rollout_s": _median_after_warmup(timers[name].rollout_s),
            "update_s": _median_after_warmup(update_s[name]),
        }
        r["rollout_steps_per_s"] = UPDATE_STEPS / r["rollout_s"]
        r["update_steps_per_s"] = UPDATE_STEPS / r["update_s"]
        r["learner_s"] = r["update_s"] - r["rollout_s"]
        workers = ROLLOUT_VARIANTS[name]
        if workers:
            counted = timers[name].collect[WARMUP_UPDATES:]
            r["collect_wall_s"] = statistics.median(c["wall_s"] for c in counted)
            r["put_s"] = statistics.median(c["put_s"] for c in counted)
            r["group_compute_s"] = statistics.median(c["compute_s"] / DEFAULT_N_GROUPS for c in counted)
            # the workers' compute spread evenly over them; the rest of the collect is Ray's (put, calls, transfers)
            r["ray_overhead_s"] = statistics.median(c["wall_s"] - c["compute_s"] / workers for c in counted)
        r["weights"] = {k: v.detach().clone() for k, v in model.policy.state_dict().items()}
        close()
        out[name] = r
    return out


@ray.remote(num_cpus=1)
class Echo:
    """Returns what it is sent: per-call and per-byte costs of a round trip through Ray."""

    def echo(self, payload: Any) -> Any:
        return payload


def measure_call_costs(weights_bytes: int, group_bytes: int) -> dict[str, float]:
    echo = Echo.remote()
    ray.get(echo.echo.remote(None))
    start = time.perf_counter()
    for _ in range(LATENCY_CALLS):
        ray.get(echo.echo.remote(None))
    call_s = (time.perf_counter() - start) / LATENCY_CALLS
    out = {"call_round_trip_s": call_s}
    for name, size in (("weights", weights_bytes), ("group", group_bytes)):
        payload = np.zeros(size, dtype=np.uint8)
        ray.get(echo.echo.remote(payload))
        start = time.perf_counter()
        for _ in range(PAYLOAD_REPEATS):
            ray.get(echo.echo.remote(payload))
        out[f"{name}_round_trip_s"] = (time.perf_counter() - start) / PAYLOAD_REPEATS
    ray.kill(echo)
    return out


def payload_sizes(weights: dict[str, th.Tensor]) -> tuple[int, int]:
    weights_bytes = sum(v.numel() * v.element_size() for v in weights.values())
    env = make_env(ENV_ID, ROLLOUT_ENV_KWARGS)
    obs, _ = env.reset(seed=0)
    obs_dim = sum(int(np.prod(v.shape)) for v in obs.values())
    action_dim = int(np.prod(env.action_space.shape))
    goal_dim = int(np.prod(obs["achieved_goal"].shape))
    # observations, actions, rewards (float32) and achieved goals (float64) of T steps x G members
    group_bytes = EPISODE_STEPS * DEFAULT_GROUP_SIZE * (4 * (obs_dim + action_dim + 1) + 8 * goal_dim)
    return weights_bytes, group_bytes


# Part 2: projection ---------------------------------------------------------------------------------------
def project(
    ray1: dict[str, Any],
    costs: dict[str, float],
    weights_bytes: int,
    group_bytes: int,
    learner_per_kilo_s: float | None = None,
) -> list[dict]:
    """Time per update for W workers on separate machines (see PROJECTION_MODEL).

    :param learner_per_kilo_s: learner seconds per 1k env steps from ``benchmarks/learner_speed.py`` (e.g. on a
        GPU at the 64-worker update size); None: the 1-worker run's learner time measured here.
    """
    group_s = ray1["group_compute_s"]
    per_group_overhead = max(ray1["ray_overhead_s"] - ray1["put_s"], 0.0) / DEFAULT_N_GROUPS
    call_s = per_group_overhead + LINK_RTT_S
    learner_per_group = ray1["learner_s"] / DEFAULT_N_GROUPS
    if learner_per_kilo_s is not None:
        learner_per_group = learner_per_kilo_s * DEFAULT_GROUP_SIZE * EPISODE_STEPS / 1000.0
    steps_per_group = DEFAULT_GROUP_SIZE * EPISODE_STEPS
    rows = []
    for workers in PROJECTED_WORKERS:
        for scaling, n_groups in (("fixed 6 groups", DEFAULT_N_GROUPS), ("2 groups per worker", 2 * workers)):
            waves = math.ceil(n_groups / workers)
            transfer = (workers * weights_bytes + n_groups * group_bytes) / LINK_BANDWIDTH_BPS
            rollout = ray1["put_s"] + transfer + waves * (group_s + call_s)
            update = rollout + learner_per_group * n_groups
            rows.append(
                {
                    "workers": workers,
                    "batch": scaling,
                    "groups": n_groups,
                    "rollout_s": rollout,
                    "update_s": update,
                    "rollout_steps_per_s": n_groups * steps_per_group / rollout,
                    "update_steps_per_s": n_groups * steps_per_group / update,
                    "learner_share": learner_per_group * n_groups / update,
                }
            )
    return rows


PROJECTION_MODEL = (
    "update(W) = put + (W x weights + groups x group_arrays) / link + ceil(groups / W) x (group_compute + call) "
    "+ groups x learner_per_group. Measured here: put, group_compute (one worker's time on one group of 8 x 50 "
    "Fetch steps), call (the 1-worker collect's non-compute time per group, + a LAN round trip), learner_per_group "
    "(scoring, hindsight and training per group, from the 1-worker run). Assumed: a "
    f"{LINK_BANDWIDTH_BPS / 1e6:.0f} MB/s link per machine ({LINK_RTT_S * 1e3:.1f} ms round trip), the head sends "
    "the weights to every worker node (no broadcast tree) and receives "
    "every group through its one link, identical worker machines, one worker per core, no stragglers, and a "
    "learner whose time grows linearly with the groups per update (it trains on one core)."
)


# Part 3: population ---------------------------------------------------------------------------------------
def single_learner(total_steps: int, interval: int) -> list[dict[str, float]]:
    """GRPO's defaults on the hard task, evaluated every ``interval`` env steps (evaluation time kept apart)."""
    vec_env = threaded_envs(HARD_ENV_KWARGS)
    model = GRPO("MultiInputPolicy", vec_env, seed=SEED)
    evaluate = SuccessEvaluator(ENV_ID, HARD_ENV_KWARGS, EVAL_EPISODES)
    curve, train_s, eval_s = [], 0.0, 0.0
    while model.num_timesteps < total_steps:
        start = time.perf_counter()
        model.learn(interval, reset_num_timesteps=False)
        train_s += time.perf_counter() - start
        start = time.perf_counter()
        success = evaluate(model)
        eval_s += time.perf_counter() - start
        curve.append(
            {"env_steps": model.num_timesteps, "success": success, "train_s": train_s, "wall_s": train_s + eval_s}
        )
    vec_env.close()
    return curve


def population_run(
    members: int, member_steps: int, interval: int, storage: Path, min_pair_js: float = DEFAULT_MIN_PAIR_JS
) -> dict[str, Any]:
    env = make_env(ENV_ID, HARD_ENV_KWARGS)
    probes = probe_states(env, PROBE_STATES, PROBE_SEED)
    env.close()
    config = PopulationConfig(
        members=members,
        total_timesteps=member_steps,
        interval_timesteps=interval,
        storage_path=str(storage.resolve()),
        mutations=Mutations(),
        min_pair_js=min_pair_js,
        seed=SEED,
        name="pbt_bench",
    )
    start = time.perf_counter()
    result = train_population(
        config,
        MemberBuilder(ENV_ID, HARD_ENV_KWARGS, {}, DEFAULT_GROUP_SIZE * DEFAULT_N_GROUPS),
        SuccessEvaluator(ENV_ID, HARD_ENV_KWARGS, EVAL_EPISODES),
        probes,
        storage / "population_log.jsonl",
    )
    wall = time.perf_counter() - start
    curve = [
        {
            "interval": record["interval"],
            "env_steps": record["env_steps_total"],
            "best_success": max(record["success"].values()),
            "mean_success": float(np.mean(list(record["success"].values()))),
            "diversity_js": record["diversity_js"],
            "min_pair_js": record["min_pair_js"],
            "pairs_below_threshold": record["pairs_below_threshold"],
            "wall_s": record["elapsed_s"],
        }
        for record in result.intervals
    ]
    return {
        "members": members,
        "member_steps": member_steps,
        "interval": interval,
        "replaced_per_round": config.replaced_per_round,
        "wall_s": wall,
        "total_env_steps": result.total_env_steps,
        "exploits": len(result.exploits),
        "collapses": len(result.collapses),
        "min_pair_js": config.min_pair_js,
        "copies_js_to_donor": [e["perturbation"]["js_to_donor"] for e in result.exploits],
        "best_success": result.best_success,
        "best_hyperparameters": result.best_hyperparameters,
        "curve": curve,
    }


def success_at(curve: list[dict[str, float]], key: str, value: float, success_key: str) -> float:
    """The success of the last point of ``curve`` with ``curve[key] <= value`` (0 before the first point)."""
    reached = [p[success_key] for p in curve if p[key] <= value + 1e-9]
    return reached[-1] if reached else 0.0


# Report ---------------------------------------------------------------------------------------------------
def population_markdown(results: dict[str, Any]) -> list[str]:
    """The population section: PBT vs one learner, and the diversity per interval."""
    lines: list[str] = []
    pop = results["population"]
    single = results["single_learner"]
    lines += [
        "",
        f"## Population: PBT with {pop['members']} members vs one learner, hard reach "
        "(delay 1..3 per episode, distance_threshold 0.02 m), same total env steps",
        "",
        f"PBT: {pop['members']} members x {pop['member_steps']} env steps, a round every {pop['interval']} env steps "
        f"per member, {pop['replaced_per_round']} replaced per round; {pop['exploits']} exploit steps; "
        f"{pop['wall_s']:.0f} s. One learner: GRPO defaults, {single[-1]['env_steps']} env steps, "
        f"{single[-1]['train_s']:.0f} s training (+ {single[-1]['wall_s'] - single[-1]['train_s']:.0f} s "
        f"evaluation). Success: deterministic, {EVAL_EPISODES} fixed episodes.",
        "",
        "| comparison | PBT (best member) | one learner |",
        "|---|---|---|",
    ]
    for row in results["comparison"]:
        lines.append(f"| {row['at']} | {row['pbt']:.2f} | {row['single']:.2f} |")
    lines += [
        "",
        f"Diversity kept above {pop['min_pair_js']} nats (`min_pair_js`): {pop['collapses']} members replaced for "
        f"sitting closer than that to another; every copy perturbed to >= the threshold from its donor "
        f"(JS to donor: {', '.join(f'{v:.4f}' for v in pop['copies_js_to_donor']) or '-'}). The table's JS figures "
        "are measured when each interval ends, before that round's replacements.",
        "",
        "| PBT interval | total env steps | best | mean | diversity (mean pairwise JS, nats) | closest pair | "
        "pairs below threshold | wall s |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for p in pop["curve"]:
        lines.append(
            f"| {p['interval']} | {p['env_steps']} | {p['best_success']:.2f} | {p['mean_success']:.2f} | "
            f"{p['diversity_js']:.4f} | {p['min_pair_js']:.4f} | {p['pairs_below_threshold']} | {p['wall_s']:.0f} |"
        )
    return lines


def markdown(results: dict[str, Any]) -> str:
    lines = [
        f"# Scale-out (one run, {results['machine']['cpus']} cores shared with other jobs; "
        f"load avg {results['machine']['load_start']:.2f} at start, {results['machine']['load_end']:.2f} at end)",
        "",
        f"Command: `{results['command']}`",
        "",
        "## Rollouts: DelayedFetchReach k=2, GRPO defaults (6 groups x 8 members x 50 steps = 2,400 env steps per "
        f"update), median of {results['rollouts'][0]['counted_updates']} updates after {WARMUP_UPDATES} warm-up",
        "",
        "| path | rollout s | rollout env steps/s | update s | env steps/s (whole update) | learner s | "
        "Ray overhead s per update |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in results["rollouts"]:
        overhead = f"{r['ray_overhead_s']:.3f}" if "ray_overhead_s" in r else "-"
        lines.append(
            f"| {r['variant']} | {r['rollout_s']:.2f} | {r['rollout_steps_per_s']:.0f} | {r['update_s']:.2f} | "
            f"{r['update_steps_per_s']:.0f} | {r['learner_s']:.2f} | {overhead} |"
        )
    costs = results["call_costs"]
    lines += [
        "",
        f"1 and 2 Ray workers ended with bit-identical weights: **{results['ray_1_vs_2_identical']}** "
        f"(threaded vs Ray identical: {results['threaded_vs_ray_identical']}; not expected: other random streams).",
        "",
        f"Ray costs measured here (loopback): call round trip {1e3 * costs['call_round_trip_s']:.2f} ms; "
        f"weights ({results['payload_bytes']['weights']} B) round trip {1e3 * costs['weights_round_trip_s']:.2f} ms; "
        f"one group's arrays ({results['payload_bytes']['group']} B) round trip "
        f"{1e3 * costs['group_round_trip_s']:.2f} ms; one group's compute on a worker "
        f"{results['rollouts_by_name']['ray_1']['group_compute_s']:.3f} s.",
        "",
        "## Projection: W workers on separate machines",
        "",
        f"Model: {PROJECTION_MODEL}",
        "",
        "| workers | batch per update | rollout s | rollout env steps/s | update s | env steps/s | learner share |",
        "|---|---|---|---|---|---|---|",
    ]
    for p in results["projection"]:
        lines.append(
            f"| {p['workers']} | {p['batch']} ({p['groups']}) | {p['rollout_s']:.3f} | "
            f"{p['rollout_steps_per_s']:.0f} | {p['update_s']:.3f} | {p['update_steps_per_s']:.0f} | "
            f"{100 * p['learner_share']:.0f}% |"
        )
    lines += population_markdown(results)
    lines += [
        "",
        f"Peak memory: this process {results['peak_rss_mb']['self']:.0f} MB (ru_maxrss); this process and its Ray "
        f"processes together {results['peak_rss_mb']['with_ray']:.0f} MB (sampled every {SAMPLE_S} s).",
    ]
    if results.get("reduced"):
        lines += ["", f"Reduced run: {results['reduced']}"]
    return "\n".join(lines) + "\n"


def population_part(args: argparse.Namespace, ray_options: dict[str, Any]) -> tuple[list, dict, list]:
    """Part 3: one learner and the population, given the same total env steps; their comparison."""
    total = args.members * args.member_steps
    single = single_learner(total, args.interval)
    print(f"one learner: {single[-1]['success']:.2f} at {single[-1]['env_steps']} env steps", flush=True)
    storage = RUNS / "scale_out"
    shutil.rmtree(storage, ignore_errors=True)  # a fresh Tune experiment every run
    ray.init(num_cpus=CPUS, **ray_options)
    try:
        pop = population_run(args.members, args.member_steps, args.interval, storage, args.min_pair_js)
    finally:
        ray.shutdown()
    print(f"PBT: best {pop['best_success']:.2f}, {pop['exploits']} exploits", flush=True)
    final_pbt = pop["curve"][-1]
    both_running = min(pop["wall_s"], single[-1]["wall_s"])  # wall time both runs reached
    comparison = [
        {
            "at": f"equal total env steps ({final_pbt['env_steps']})",
            "pbt": final_pbt["best_success"],
            "single": success_at(single, "env_steps", final_pbt["env_steps"], "success"),
        },
        {
            "at": f"equal wall time ({both_running:.0f} s, when the first of the two finished; evaluation included)",
            "pbt": success_at(pop["curve"], "wall_s", both_running, "best_success"),
            "single": success_at(single, "wall_s", both_running, "success"),
        },
        {
            "at": f"one member's budget ({args.member_steps} env steps each)",
            "pbt": final_pbt["best_success"],
            "single": success_at(single, "env_steps", args.member_steps, "success"),
        },
    ]
    return single, pop, comparison


def population_only(args: argparse.Namespace, ray_options: dict[str, Any]) -> None:
    """Part 3 alone (``--population-only``): writes scale_out_population.json and .md."""
    load_start = os.getloadavg()[0]
    single, pop, comparison = population_part(args, ray_options)
    results = {
        "command": "benchmarks/scale_out.py " + " ".join(sys.argv[1:]),
        "load": [load_start, os.getloadavg()[0]],
        "single_learner": single,
        "population": pop,
        "comparison": comparison,
    }
    header = [
        f"# Scale-out, population part alone (2 cores shared with other jobs; load avg {load_start:.2f} at start, "
        f"{results['load'][1]:.2f} at end)",
        "",
        f"Command: `{results['command']}`",
    ]
    text = "\n".join(header + population_markdown(results)) + "\n"
    RESULTS.mkdir(exist_ok=True)
    name = "scale_out_population" + ("" if args.min_pair_js == DEFAULT_MIN_PAIR_JS else f"_js{args.min_pair_js:g}")
    (RESULTS / f"{name}.json").write_text(json.dumps(results, indent=2))
    (RESULTS / f"{name}.md").write_text(text)
    print(text)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--updates", type=int, default=4, help="updates per rollout variant (first is warm-up)")
    parser.add_argument("--members", type=int, default=8)
    parser.add_argument("--member-steps", type=int, default=12_000, help="env steps per PBT member")
    parser.add_argument("--interval", type=int, default=2_400, help="env steps per member between PBT rounds")
    parser.add_argument("--reduced", default="", help="say what was reduced (written into the report)")
    parser.add_argument("--population-only", action="store_true", help="part 3 alone: scale_out_population.*")
    parser.add_argument(
        "--min-pair-js",
        type=float,
        default=DEFAULT_MIN_PAIR_JS,
        help="the population's diversity threshold, nats (a tiny value such as 1e-9 turns diversity keeping off)",
    )
    args = parser.parse_args()
    if args.updates <= WARMUP_UPDATES:
        raise SystemExit(f"--updates must be > {WARMUP_UPDATES} (the first update is a warm-up)")
    th.set_num_threads(1)
    load_start = os.getloadavg()[0]
    ray_options = {"include_dashboard": False, "log_to_driver": False, "configure_logging": False}
    if args.population_only:
        population_only(args, ray_options)
        return
    with PeakRss() as rss:
        ray.init(num_cpus=ROLLOUT_RAY_CPUS, **ray_options)
        try:
            rollouts = run_rollouts(args.updates)
            for name, r in rollouts.items():
                print(f"{name}: rollout {r['rollout_s']:.2f} s, update {r['update_s']:.2f} s", flush=True)
            weights_bytes, group_bytes = payload_sizes(rollouts["ray_1"]["weights"])
            costs = measure_call_costs(weights_bytes, group_bytes)
        finally:
            ray.shutdown()
        ray_1, ray_2 = rollouts["ray_1"]["weights"], rollouts["ray_2"]["weights"]
        identical = all(th.equal(ray_1[k], v) for k, v in ray_2.items())
        same_as_threaded = all(th.equal(rollouts["threaded"]["weights"][k], v) for k, v in ray_1.items())
        single, pop, comparison = population_part(args, ray_options)
    for r in rollouts.values():
        del r["weights"]
    results = {
        "command": "benchmarks/scale_out.py " + " ".join(sys.argv[1:]),
        "machine": {
            "cpus": os.cpu_count(),
            "python": platform.python_version(),
            "ray": ray.__version__,
            "torch": th.__version__,
            "load_start": load_start,
            "load_end": os.getloadavg()[0],
        },
        "rollouts": list(rollouts.values()),
        "rollouts_by_name": rollouts,
        "ray_1_vs_2_identical": identical,
        "threaded_vs_ray_identical": same_as_threaded,
        "payload_bytes": {"weights": weights_bytes, "group": group_bytes},
        "call_costs": costs,
        "projection_model": PROJECTION_MODEL,
        "projection": project(rollouts["ray_1"], costs, weights_bytes, group_bytes),
        "single_learner": single,
        "population": pop,
        "comparison": comparison,
        "peak_rss_mb": {
            "self": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
            "with_ray": rss.peak_total / 2**20,
        },
        "reduced": args.reduced,
    }
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "scale_out.json").write_text(json.dumps(results, indent=2))
    (RESULTS / "scale_out.md").write_text(markdown(results))
    print(markdown(results))


if __name__ == "__main__":
    main()
