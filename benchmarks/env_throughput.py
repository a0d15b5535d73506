"""Env throughput, side by side in one run: raw FetchReach-v4, its bare mj_step cost, DelayedFetchReach (k=2),
PointReach (k=2), raw FetchPush-v4 against DelayedFetchPush-v0 (k=2: the generic delay and snapshot wrappers with
the Fetch lookups cached, ``envs.fetch_lookups``), and a batch of 16 DelayedFetchReach envs stepped on one core and
across two.

Every measurement runs for a fixed wall time once per round and the rounds interleave the cases, so a burst of
load from other processes hits all of them alike; the tables report the median over rounds (and min / max).

The batch is stepped four ways: sequentially in this process (one core), by 2 threads (8 envs each; this only
scales if ``mujoco.mj_step`` releases the GIL, which the "GIL check" rows measure), by 2 worker processes (8 envs
each, one pipe round trip per batch step), and by SB3's SubprocVecEnv (16 processes, one env each).

Writes benchmarks/results/env_throughput.json and .md and reports peak memory (ru_maxrss).

    .venv/bin/python benchmarks/env_throughput.py [--rounds 5] [--seconds 0.6]
"""

from __future__ import annotations

import argparse
import copy
import json
import multiprocessing as mp
import os
import platform
import resource
import statistics
import sys
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import gymnasium as gym
import gymnasium_robotics
import mujoco
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a checkout without installing

import envs  # noqa: F401  (registers the ids)
from envs.delayed_fetch_reach import DelayedFetchReachEnv
from envs.point_reach import PointReachEnv

RESULTS = Path(__file__).resolve().parent / "results"
FETCH_SUBSTEPS = 20  # FetchReach: 20 MuJoCo substeps of 2 ms per 40 ms control step
DELAY_STEPS = 2
EPISODE_STEPS = 50  # FetchReach's episode length; every case resets after it, like a VecEnv
BATCH = 16
WORKERS = 2  # the 2 cores of the target machine
ACTION_TABLE = 997  # pre-drawn random actions, cycled (a prime, so batch members see different ones)
CHECK_EVERY = 16  # steps between clock reads inside a timed loop
GIL_PROBE_SUBSTEPS = 4000  # one mj_step call of a few hundred ms
CLOCK_TICKS = os.sysconf("SC_CLK_TCK")  # /proc CPU times are in these ticks per second
MIN_CPU_S = 1e-3  # guards the CPU-rate division against a too coarse clock
TARGET_WRAPPER_OVERHEAD = 0.10
MJ_STEP_IN_ENV = "mj_step x20 alone, timed inside DelayedFetchReach steps"
RAW_PUSH = "raw FetchPush-v4 (gym.make)"
DELAYED_PUSH = f"DelayedFetchPush-v0 k={DELAY_STEPS} (gym.make)"
BATCH_KEYS = {  # derived-metric key -> case name of the parallel batch runs
    "threads": "batch16: 2 threads x 8 envs",
    "processes": "batch16: 2 processes x 8 envs",
    "sb3": "batch16: SB3 SubprocVecEnv (16 procs)",
}
TARGET_BATCH_SPEEDUP = 1.7


def _actions(dim: int, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).uniform(-1, 1, size=(ACTION_TABLE, dim))


def _cpu_seconds(pids: tuple[int, ...] = ()) -> float:
    """CPU seconds (user + system) of this process (all threads), its waited-for children and live ``pids``."""
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    total = time.process_time() + children.ru_utime + children.ru_stime
    for pid in pids:
        with open(f"/proc/{pid}/stat") as stat:
            fields = stat.read().rsplit(")", 1)[1].split()  # after the command name: field 3 (state) is index 0
        total += (int(fields[11]) + int(fields[12])) / CLOCK_TICKS  # fields 14, 15: utime, stime
    return total


Rates = tuple[float, float]  # (env steps per wall second, env steps per CPU second of all processes involved)


def _timed(step: Callable[[int], None], seconds: float, per_call: int = 1, pids: tuple[int, ...] = ()) -> Rates:
    """Call ``step(i)`` for ``seconds`` of wall time (``per_call`` env steps a call); return its rates."""
    clock = time.perf_counter
    calls, start, cpu_start = 0, clock(), _cpu_seconds(pids)
    while True:
        for _ in range(CHECK_EVERY):
            step(calls)
            calls += 1
        elapsed = clock() - start
        if elapsed >= seconds:
            steps = calls * per_call
            return steps / elapsed, steps / max(_cpu_seconds(pids) - cpu_start, MIN_CPU_S)


# Single-env cases --------------------------------------------------------------------------------------
def goal_env_case(env: gym.Env) -> Callable[[float], Rates]:
    actions = _actions(env.action_space.shape[0])
    env.reset(seed=0)
    counter = {"t": 0}

    def step(i: int) -> None:
        env.step(actions[i % ACTION_TABLE])
        counter["t"] += 1
        if counter["t"] == EPISODE_STEPS:
            env.reset()
            counter["t"] = 0

    return lambda seconds: _timed(step, seconds)


def mj_step_case(model: mujoco.MjModel, data: mujoco.MjData) -> Callable[[float], Rates]:
    def step(_: int) -> None:
        mujoco.mj_step(model, data, nstep=FETCH_SUBSTEPS)

    return lambda seconds: _timed(step, seconds)


def mj_step_in_env_case(env: DelayedFetchReachEnv) -> Callable[[float], Rates]:
    """The 20-substep mj_step alone, timed inside DelayedFetchReach steps (the arm moving, as in training).

    mj_step's cost depends on the state (contacts): on the arm at rest it is ~25% dearer than along a trajectory,
    so this, not the at-rest row, is the mj_step share of a step.
    """
    fetch = env._fetch
    spent = {"wall": 0.0, "cpu": 0.0, "calls": 0}

    def timed_mujoco_step(_action: np.ndarray) -> None:
        wall, cpu = time.perf_counter(), time.thread_time()
        mujoco.mj_step(fetch.model, fetch.data, nstep=fetch.n_substeps)
        spent["wall"] += time.perf_counter() - wall
        spent["cpu"] += time.thread_time() - cpu
        spent["calls"] += 1

    fetch._mujoco_step = timed_mujoco_step
    run_env = goal_env_case(env)

    def run(seconds: float) -> Rates:
        spent.update(wall=0.0, cpu=0.0, calls=0)
        run_env(seconds)
        return spent["calls"] / spent["wall"], spent["calls"] / max(spent["cpu"], MIN_CPU_S)

    return run


def _fetch_model_and_data(n: int) -> list[tuple[mujoco.MjModel, mujoco.MjData]]:
    """n copies of FetchReach-v4's MjData after its reset (the arm in its start pose), sharing one model."""
    fetch = gym.make("FetchReach-v4").unwrapped
    fetch.reset(seed=0)
    return [(fetch.model, copy.copy(fetch.data)) for _ in range(n)]


def _mj_step_for(model: mujoco.MjModel, data: mujoco.MjData, seconds: float, conn: Any) -> None:
    count, start = 0, time.perf_counter()
    while time.perf_counter() - start < seconds:
        mujoco.mj_step(model, data, nstep=FETCH_SUBSTEPS)
        count += 1
    conn.send(count)


def mj_step_processes_case(n_procs: int) -> Callable[[float], Rates]:
    """n forked processes stepping mj_step for the same wall time: the no-GIL reference for the thread rows."""
    pairs = _fetch_model_and_data(n_procs)
    ctx = mp.get_context("fork")

    def run(seconds: float) -> Rates:
        pipes = [ctx.Pipe() for _ in range(n_procs)]
        start, cpu_start = time.perf_counter(), _cpu_seconds()
        procs = [ctx.Process(target=_mj_step_for, args=(*pairs[k], seconds, pipes[k][1])) for k in range(n_procs)]
        for proc in procs:
            proc.start()
        total = sum(parent.recv() for parent, _ in pipes)
        elapsed = time.perf_counter() - start  # includes the fork: a slight underestimate
        for proc in procs:
            proc.join()  # waited for: their CPU time now counts in RUSAGE_CHILDREN
        return total / elapsed, total / max(_cpu_seconds() - cpu_start, MIN_CPU_S)

    return run


def gil_probe(substeps: int = GIL_PROBE_SUBSTEPS) -> dict[str, float]:
    """Does ``mujoco.mj_step`` release the GIL? Count a Python loop in the main thread while another thread is
    inside one long mj_step call, and again while that thread only sleeps for the same time. Held GIL: the first
    count is ~0. Released: the two counts are close (on a busy machine the OS still shares the cores)."""
    ((model, data),) = _fetch_model_and_data(1)

    def count_until(event: threading.Event) -> int:
        n = 0
        while not event.is_set():
            n += 1
        return n

    stepped = threading.Event()
    span: dict[str, float] = {}

    def step() -> None:
        start = time.perf_counter()
        mujoco.mj_step(model, data, nstep=substeps)
        span["s"] = time.perf_counter() - start
        stepped.set()

    thread = threading.Thread(target=step)
    thread.start()
    during = count_until(stepped)
    thread.join()
    slept = threading.Event()
    timer = threading.Timer(span["s"], slept.set)
    timer.start()
    alone = count_until(slept)
    timer.join()
    return {"call_ms": span["s"] * 1e3, "loops_during_mj_step": during, "loops_alone": alone, "ratio": during / alone}


def mj_step_threads_case(n_threads: int) -> Callable[[float], Rates]:
    """n threads, each with its own MjData, stepping for the same wall time: total control steps per second."""
    pairs = _fetch_model_and_data(n_threads)

    def run(seconds: float) -> Rates:
        counts = [0] * n_threads
        stop = threading.Event()

        def worker(k: int) -> None:
            model, data = pairs[k]
            while not stop.is_set():
                mujoco.mj_step(model, data, nstep=FETCH_SUBSTEPS)
                counts[k] += 1

        threads = [threading.Thread(target=worker, args=(k,)) for k in range(n_threads)]
        start, cpu_start = time.perf_counter(), _cpu_seconds()
        for thread in threads:
            thread.start()
        time.sleep(seconds)  # the main thread only waits; the workers do the measured work
        stop.set()
        for thread in threads:
            thread.join()
        total = sum(counts)
        return total / (time.perf_counter() - start), total / max(_cpu_seconds() - cpu_start, MIN_CPU_S)

    return run


# Batch of 16 envs --------------------------------------------------------------------------------------
def make_batch_env() -> DelayedFetchReachEnv:
    return DelayedFetchReachEnv(delay=DELAY_STEPS, obs_noise_std_m=0.0, max_episode_steps=EPISODE_STEPS)


class EnvBlock:
    """A few envs stepped one after another with auto-reset, returning stacked observations (a VecEnv's work)."""

    def __init__(self, n: int, seed: int) -> None:
        self.envs = [make_batch_env() for _ in range(n)]
        for i, env in enumerate(self.envs):
            env.reset(seed=seed + i)

    def step(self, actions: np.ndarray) -> np.ndarray:
        out = []
        for env, action in zip(self.envs, actions, strict=True):
            obs, _, terminated, truncated, _ = env.step(action)
            if terminated or truncated:
                obs, _ = env.reset()
            out.append(obs["observation"])
        return np.stack(out)


def _block_worker(conn: Any, n: int, seed: int) -> None:
    block = EnvBlock(n, seed)
    conn.send(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)
    while True:
        actions = conn.recv()
        if actions is None:
            conn.send(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)
            return
        conn.send(block.step(actions))


class ProcessBatch:
    """WORKERS processes, BATCH / WORKERS envs each; one pipe round trip per worker per batch step."""

    def __init__(self) -> None:
        ctx = mp.get_context("fork")
        per = BATCH // WORKERS
        self.conns, self.procs = [], []
        for w in range(WORKERS):
            parent, child = ctx.Pipe()
            proc = ctx.Process(target=_block_worker, args=(child, per, w * per), daemon=True)
            proc.start()
            self.conns.append(parent)
            self.procs.append(proc)
        self.worker_rss_kib = [conn.recv() for conn in self.conns]
        self.per = per

    def step(self, actions: np.ndarray) -> np.ndarray:
        for w, conn in enumerate(self.conns):
            conn.send(actions[w * self.per : (w + 1) * self.per])
        return np.concatenate([conn.recv() for conn in self.conns])

    def close(self) -> list[int]:
        for conn in self.conns:
            conn.send(None)
        peaks = [conn.recv() for conn in self.conns]
        for proc in self.procs:
            proc.join()
        return peaks


def batch_cases() -> tuple[dict[str, Callable[[float], Rates]], Callable[[], dict[str, float]]]:
    from stable_baselines3.common.vec_env import SubprocVecEnv

    table = _actions(4, seed=1)
    rows = np.arange(BATCH)

    def actions_at(i: int) -> np.ndarray:
        return table[(i * BATCH + rows) % ACTION_TABLE]

    sequential = EnvBlock(BATCH, seed=0)
    halves = [EnvBlock(BATCH // WORKERS, seed=100 + w * BATCH) for w in range(WORKERS)]
    pool = ThreadPoolExecutor(max_workers=WORKERS)
    per = BATCH // WORKERS

    def threaded(i: int) -> None:
        actions = actions_at(i)
        list(pool.map(lambda w: halves[w].step(actions[w * per : (w + 1) * per]), range(WORKERS)))

    processes = ProcessBatch()
    sb3 = SubprocVecEnv([make_batch_env] * BATCH, start_method="fork")
    sb3.reset()

    def sb3_step(i: int) -> None:
        sb3.step(actions_at(i))  # SB3 auto-resets at truncation

    cases = {
        "batch16: 1 core, sequential": lambda s: _timed(lambda i: sequential.step(actions_at(i)), s, BATCH),
        BATCH_KEYS["threads"]: lambda s: _timed(threaded, s, BATCH),
        BATCH_KEYS["processes"]: lambda s: _timed(
            lambda i: processes.step(actions_at(i)), s, BATCH, tuple(p.pid for p in processes.procs)
        ),
        BATCH_KEYS["sb3"]: lambda s: _timed(sb3_step, s, BATCH, tuple(p.pid for p in sb3.processes)),
    }

    def close() -> dict[str, float]:
        pool.shutdown()
        sb3.close()
        peaks = processes.close()
        return {"process_worker_peak_rss_mib": max(peaks) / 1024}

    return cases, close


# Report ------------------------------------------------------------------------------------------------
def summarize(samples: list[float]) -> dict[str, float]:
    return {"median": statistics.median(samples), "min": min(samples), "max": max(samples), "rounds": len(samples)}


def derive(wall: dict[str, dict[str, float]], cpu: dict[str, dict[str, float]]) -> dict[str, float]:
    """Ratios of medians. Wall-clock ratios are what the targets ask; CPU-time ratios are what the load of other
    processes on this machine distorts least (a descheduled process accrues no CPU time)."""

    def w(name: str) -> float:
        return wall[name]["median"]

    def c(name: str) -> float:
        return cpu[name]["median"]

    raw, delayed, point = (
        "raw FetchReach-v4 (unwrapped)",
        f"DelayedFetchReach k={DELAY_STEPS} (unwrapped)",
        (f"PointReach k={DELAY_STEPS} (unwrapped)"),
    )
    seq = "batch16: 1 core, sequential"
    out = {
        "delayed_vs_raw_overhead_wall": w(raw) / w(delayed) - 1.0,
        "delayed_vs_raw_overhead_cpu": c(raw) / c(delayed) - 1.0,
        "delayed_push_vs_raw_overhead_wall": w(RAW_PUSH) / w(DELAYED_PUSH) - 1.0,
        "delayed_push_vs_raw_overhead_cpu": c(RAW_PUSH) / c(DELAYED_PUSH) - 1.0,
        "wrapper_logic_share_of_raw_cpu": c(raw) / c(point),
        "mj_step_share_of_raw_cpu": c(raw) / c(MJ_STEP_IN_ENV),
        "mj_step_share_of_delayed_cpu": c(delayed) / c(MJ_STEP_IN_ENV),
        "mj_step_2threads_speedup_wall": w("GIL check: mj_step x20, 2 threads (total)")
        / w("GIL check: mj_step x20, 1 thread"),
        "mj_step_2threads_vs_2processes_wall": w("GIL check: mj_step x20, 2 threads (total)")
        / w("GIL check: mj_step x20, 2 processes (total)"),
    }
    # Projections for two free cores (a model, not a measurement): processes are bounded by their CPU efficiency;
    # threads also by Amdahl's law, since only mj_step runs without the GIL.
    free = out["mj_step_share_of_delayed_cpu"]
    out["projected_2core_threads_max"] = min(
        2.0 * c(BATCH_KEYS["threads"]) / c(seq), 1.0 / ((1.0 - free) + free / WORKERS)
    )
    out["projected_2core_processes_max"] = 2.0 * c(BATCH_KEYS["processes"]) / c(seq)
    for key, name in BATCH_KEYS.items():
        out[f"batch_{key}_speedup_wall"] = w(name) / w(seq)
        out[f"batch_{key}_cpu_efficiency"] = c(name) / c(seq)  # 1.0: no CPU spent on parallelism overhead
        out[f"batch_{key}_cores_obtained"] = w(name) / c(name)  # mean CPU seconds per wall second
    return out


def write_markdown(result: dict[str, Any], path: Path) -> None:
    wall, cpu, d, g = result["steps_per_s"], result["steps_per_cpu_s"], result["derived"], result["gil_probe"]
    m = result["machine"]
    lines = [
        f"# Env throughput (median of {result['rounds']} interleaved rounds x {result['seconds_per_case']} s, "
        f"{m['cpus']} CPUs shared with other jobs: load avg {m['loadavg_start']:.2f} at start, "
        f"{m['loadavg_end']:.2f} at end)",
        "",
        "| case | steps/s wall (median) | min | max | us/step wall | steps per CPU-s (median) | us CPU/step |",
        "|---|---|---|---|---|---|---|",
    ]
    for name, v in wall.items():
        cv = cpu[name]["median"]
        lines.append(
            f"| {name} | {v['median']:.0f} | {v['min']:.0f} | {v['max']:.0f} | {1e6 / v['median']:.1f} "
            f"| {cv:.0f} | {1e6 / cv:.1f} |"
        )
    lines += [
        "",
        "| derived (ratios of medians) | value | target |",
        "|---|---|---|",
        f"| DelayedFetchReach k=2 time per step / raw FetchReach-v4 - 1, wall | "
        f"{d['delayed_vs_raw_overhead_wall']:+.1%} | <= {TARGET_WRAPPER_OVERHEAD:.0%} |",
        f"| the same, CPU time | {d['delayed_vs_raw_overhead_cpu']:+.1%} | <= {TARGET_WRAPPER_OVERHEAD:.0%} |",
        f"| DelayedFetchPush-v0 k=2 time per step / raw FetchPush-v4 - 1, wall (delay and snapshot wrappers, "
        f"lookups cached) | {d['delayed_push_vs_raw_overhead_wall']:+.1%} | <= {TARGET_WRAPPER_OVERHEAD:.0%} |",
        f"| the same, CPU time | {d['delayed_push_vs_raw_overhead_cpu']:+.1%} | <= {TARGET_WRAPPER_OVERHEAD:.0%} |",
        f"| delay + contract + reward logic alone (a PointReach step) / raw FetchReach-v4 step, CPU | "
        f"{d['wrapper_logic_share_of_raw_cpu']:.1%} | |",
        f"| mj_step x20 (inside steps) / raw FetchReach-v4 step, CPU | {d['mj_step_share_of_raw_cpu']:.0%} | |",
        f"| mj_step x20 (inside steps) / DelayedFetchReach step, CPU | {d['mj_step_share_of_delayed_cpu']:.0%} | |",
        f"| GIL probe: Python loops in the main thread during one {g['call_ms']:.0f} ms mj_step call in another "
        f"thread / loops alone in the same time | {g['ratio']:.2f} | ~0 if held, ~1 if released |",
        f"| mj_step x20: 2 threads / 1 thread, wall | {d['mj_step_2threads_speedup_wall']:.2f}x | ~2x on 2 free "
        "cores |",
        f"| mj_step x20: 2 threads / 2 processes, wall | {d['mj_step_2threads_vs_2processes_wall']:.2f}x | ~1x if "
        "released |",
    ]
    for key, name in BATCH_KEYS.items():
        lines.append(
            f"| {name} / 1 core, wall | {d[f'batch_{key}_speedup_wall']:.2f}x "
            f"(cores obtained {d[f'batch_{key}_cores_obtained']:.2f}, CPU efficiency "
            f"{d[f'batch_{key}_cpu_efficiency']:.0%}) | >= {TARGET_BATCH_SPEEDUP}x |"
        )
    lines += [
        f"| projection for 2 free cores: 2 threads x 8 envs (Amdahl: only mj_step leaves the GIL) | "
        f"<= {d['projected_2core_threads_max']:.2f}x | >= {TARGET_BATCH_SPEEDUP}x |",
        f"| projection for 2 free cores: 2 processes x 8 envs (2 x CPU efficiency) | "
        f"<= {d['projected_2core_processes_max']:.2f}x | >= {TARGET_BATCH_SPEEDUP}x |",
        "",
        "Cores obtained = CPU seconds of all processes involved per wall second: below 2 the batch did not get two "
        "free cores. CPU efficiency = steps per CPU-second relative to the sequential batch (what the parallel "
        "scheme costs in pipes, pickling and thread switches); on two free cores the wall speedup is at most "
        "2 x that efficiency.",
        "",
        f"Peak RSS: this process {result['peak_rss_mib']['main']:.0f} MiB, largest batch worker process "
        f"{result['peak_rss_mib']['process_worker']:.0f} MiB, largest waited-for child "
        f"{result['peak_rss_mib']['children']:.0f} MiB.",
        f"Versions: mujoco {result['versions']['mujoco']}, gymnasium {result['versions']['gymnasium']}, "
        f"gymnasium-robotics {result['versions']['gymnasium_robotics']}, numpy {result['versions']['numpy']}, "
        f"Python {result['versions']['python']}.",
        "",
        "Reproduce: `.venv/bin/python benchmarks/env_throughput.py`. Compare rows of one run, not runs.",
        "",
    ]
    path.write_text("\n".join(lines))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--seconds", type=float, default=0.6, help="wall time per case per round")
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args()
    if args.rounds < 1 or args.seconds <= 0:
        raise ValueError("--rounds must be >= 1 and --seconds > 0")
    loadavg_start = os.getloadavg()[0]

    raw = gym.make("FetchReach-v4").unwrapped
    bare = gym.make("FetchReach-v4").unwrapped
    bare.reset(seed=0)
    single = {
        "raw FetchReach-v4 (unwrapped)": goal_env_case(raw),
        "bare mj_step x20 (same model, arm at rest)": mj_step_case(bare.model, bare.data),
        MJ_STEP_IN_ENV: mj_step_in_env_case(make_batch_env()),
        f"DelayedFetchReach k={DELAY_STEPS} (unwrapped)": goal_env_case(make_batch_env()),
        f"PointReach k={DELAY_STEPS} (unwrapped)": goal_env_case(PointReachEnv(delay=DELAY_STEPS)),
        RAW_PUSH: goal_env_case(gym.make("FetchPush-v4")),
        DELAYED_PUSH: goal_env_case(gym.make("DelayedFetchPush-v0", delay=DELAY_STEPS)),
        "GIL check: mj_step x20, 1 thread": mj_step_threads_case(1),
        "GIL check: mj_step x20, 2 threads (total)": mj_step_threads_case(2),
        "GIL check: mj_step x20, 2 processes (total)": mj_step_processes_case(2),
    }
    gil = gil_probe()
    batch, close_batch = batch_cases()
    cases = {**single, **batch}

    wall_samples: dict[str, list[float]] = {name: [] for name in cases}
    cpu_samples: dict[str, list[float]] = {name: [] for name in cases}
    for r in range(args.rounds):
        order = list(cases) if r % 2 == 0 else list(reversed(cases))  # alternate order: no case always first
        for name in order:
            wall_rate, cpu_rate = cases[name](args.seconds)
            wall_samples[name].append(wall_rate)
            cpu_samples[name].append(cpu_rate)
        print(f"round {r + 1}/{args.rounds} done", flush=True)
    extra = close_batch()
    wall = {name: summarize(v) for name, v in wall_samples.items()}
    cpu = {name: summarize(v) for name, v in cpu_samples.items()}
    result = {
        "rounds": args.rounds,
        "seconds_per_case": args.seconds,
        "steps_per_s": wall,
        "steps_per_cpu_s": cpu,
        "derived": derive(wall, cpu),
        "gil_probe": gil,
        "targets": {"wrapper_overhead_max": TARGET_WRAPPER_OVERHEAD, "batch_speedup_min": TARGET_BATCH_SPEEDUP},
        "peak_rss_mib": {
            "main": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
            "children": resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024,
            "process_worker": extra["process_worker_peak_rss_mib"],
        },
        "machine": {
            "platform": platform.platform(),
            "cpus": os.cpu_count(),
            "loadavg_start": loadavg_start,
            "loadavg_end": os.getloadavg()[0],
        },
        "versions": {
            "mujoco": mujoco.__version__,
            "gymnasium": gym.__version__,
            "gymnasium_robotics": getattr(gymnasium_robotics, "__version__", "unknown"),
            "numpy": np.__version__,
            "python": platform.python_version(),
        },
    }
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "env_throughput.json").write_text(json.dumps(result, indent=2) + "\n")
    write_markdown(result, args.out / "env_throughput.md")
    print((args.out / "env_throughput.md").read_text())


if __name__ == "__main__":
    main()
