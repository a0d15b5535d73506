"""Env throughput, side by side in one run: raw FetchReach-v4, its bare mj_step cost, DelayedFetchReach (k=2),
PointReach (k=2), and a batch of 16 DelayedFetchReach envs stepped on one core and across two.

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
TARGET_WRAPPER_OVERHEAD = 0.10
TARGET_BATCH_SPEEDUP = 1.7


def _actions(dim: int, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).uniform(-1, 1, size=(ACTION_TABLE, dim))


def _timed(step: Callable[[int], None], seconds: float, per_call: int = 1) -> float:
    """Call ``step(i)`` for ``seconds`` of wall time; return env steps per second (``per_call`` steps a call)."""
    clock = time.perf_counter
    calls, start = 0, clock()
    while True:
        for _ in range(CHECK_EVERY):
            step(calls)
            calls += 1
        elapsed = clock() - start
        if elapsed >= seconds:
            return calls * per_call / elapsed


# Single-env cases --------------------------------------------------------------------------------------
def goal_env_case(env: gym.Env) -> Callable[[float], float]:
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


def mj_step_case(model: mujoco.MjModel, data: mujoco.MjData) -> Callable[[float], float]:
    def step(_: int) -> None:
        mujoco.mj_step(model, data, nstep=FETCH_SUBSTEPS)

    return lambda seconds: _timed(step, seconds)


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


def mj_step_processes_case(n_procs: int) -> Callable[[float], float]:
    """n forked processes stepping mj_step for the same wall time: the no-GIL reference for the thread rows."""
    pairs = _fetch_model_and_data(n_procs)
    ctx = mp.get_context("fork")

    def run(seconds: float) -> float:
        pipes = [ctx.Pipe() for _ in range(n_procs)]
        start = time.perf_counter()
        procs = [ctx.Process(target=_mj_step_for, args=(*pairs[k], seconds, pipes[k][1])) for k in range(n_procs)]
        for proc in procs:
            proc.start()
        total = sum(parent.recv() for parent, _ in pipes)
        elapsed = time.perf_counter() - start  # includes the fork: a slight underestimate
        for proc in procs:
            proc.join()
        return total / elapsed

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


def mj_step_threads_case(n_threads: int) -> Callable[[float], float]:
    """n threads, each with its own MjData, stepping for the same wall time: total control steps per second."""
    pairs = _fetch_model_and_data(n_threads)

    def run(seconds: float) -> float:
        counts = [0] * n_threads
        stop = threading.Event()

        def worker(k: int) -> None:
            model, data = pairs[k]
            while not stop.is_set():
                mujoco.mj_step(model, data, nstep=FETCH_SUBSTEPS)
                counts[k] += 1

        threads = [threading.Thread(target=worker, args=(k,)) for k in range(n_threads)]
        start = time.perf_counter()
        for thread in threads:
            thread.start()
        time.sleep(seconds)  # the main thread only waits; the workers do the measured work
        stop.set()
        for thread in threads:
            thread.join()
        return sum(counts) / (time.perf_counter() - start)

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


def batch_cases() -> tuple[dict[str, Callable[[float], float]], Callable[[], dict[str, float]]]:
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
        "batch16: 2 threads x 8 envs": lambda s: _timed(threaded, s, BATCH),
        "batch16: 2 processes x 8 envs": lambda s: _timed(lambda i: processes.step(actions_at(i)), s, BATCH),
        "batch16: SB3 SubprocVecEnv (16 procs)": lambda s: _timed(sb3_step, s, BATCH),
    }

    def close() -> dict[str, float]:
        pool.shutdown()
        sb3.close()
        peaks = processes.close()
        return {"process_worker_peak_rss_mib": max(peaks) / 1024}

    return cases, close


# Report ------------------------------------------------------------------------------------------------
def summarize(samples: dict[str, list[float]]) -> dict[str, dict[str, float]]:
    return {
        name: {"median": statistics.median(v), "min": min(v), "max": max(v), "rounds": len(v)}
        for name, v in samples.items()
    }


def write_markdown(result: dict[str, Any], path: Path) -> None:
    s = result["steps_per_s"]
    d = result["derived"]
    g = result["gil_probe"]
    lines = [
        f"# Env throughput (median of {result['rounds']} interleaved rounds x {result['seconds_per_case']} s, "
        f"{result['machine']['cpus']} CPUs, load avg {result['machine']['loadavg_start']:.2f} at start, "
        f"{result['machine']['loadavg_end']:.2f} at end)",
        "",
        "| case | steps/s (median) | min | max | us/step |",
        "|---|---|---|---|---|",
    ]
    for name, v in s.items():
        lines.append(f"| {name} | {v['median']:.0f} | {v['min']:.0f} | {v['max']:.0f} | {1e6 / v['median']:.1f} |")
    lines += [
        "",
        "| derived | value | target |",
        "|---|---|---|",
        f"| DelayedFetchReach (k=2) time per step / raw FetchReach-v4 - 1 | {d['delayed_vs_raw_overhead']:+.1%} "
        f"| <= {TARGET_WRAPPER_OVERHEAD:.0%} |",
        f"| delay/contract/noise logic per step (= PointReach step, us) / raw FetchReach-v4 step | "
        f"{d['wrapper_logic_share_of_raw']:.1%} | |",
        f"| mj_step (20 substeps) share of a raw FetchReach-v4 step | {d['mj_step_share_of_raw']:.0%} | |",
        f"| GIL probe: main-thread Python loops during one {g['call_ms']:.0f} ms mj_step call in another thread "
        f"/ loops in the same time alone | {g['ratio']:.2f} | ~0 if held, ~1 if released |",
        f"| GIL check: 2 threads of mj_step / 1 thread | {d['mj_step_2threads_speedup']:.2f}x | ~2x if released |",
        f"| GIL check: 2 threads of mj_step / 2 processes | {d['mj_step_2threads_vs_2processes']:.2f}x "
        "| ~1x if released |",
        f"| batch16: 2 threads / 1 core | {d['batch_threads_speedup']:.2f}x | >= {TARGET_BATCH_SPEEDUP}x |",
        f"| batch16: 2 processes / 1 core | {d['batch_processes_speedup']:.2f}x | >= {TARGET_BATCH_SPEEDUP}x |",
        f"| batch16: SB3 SubprocVecEnv / 1 core | {d['batch_sb3_speedup']:.2f}x | |",
        "",
        f"Peak RSS: this process {result['peak_rss_mib']['main']:.0f} MiB, largest batch worker process "
        f"{result['peak_rss_mib']['process_worker']:.0f} MiB, all waited-for children "
        f"{result['peak_rss_mib']['children']:.0f} MiB.",
        f"Versions: mujoco {result['versions']['mujoco']}, gymnasium {result['versions']['gymnasium']}, "
        f"gymnasium-robotics {result['versions']['gymnasium_robotics']}, numpy {result['versions']['numpy']}, "
        f"Python {result['versions']['python']}.",
        "",
        "Reproduce: `.venv/bin/python benchmarks/env_throughput.py`. Other processes share these CPUs; "
        "compare rows of one run, not runs.",
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
        "bare mj_step x20 (same model)": mj_step_case(bare.model, bare.data),
        f"DelayedFetchReach k={DELAY_STEPS} (unwrapped)": goal_env_case(make_batch_env()),
        f"PointReach k={DELAY_STEPS} (unwrapped)": goal_env_case(PointReachEnv(delay=DELAY_STEPS)),
        "GIL check: mj_step x20, 1 thread": mj_step_threads_case(1),
        "GIL check: mj_step x20, 2 threads (total)": mj_step_threads_case(2),
        "GIL check: mj_step x20, 2 processes (total)": mj_step_processes_case(2),
    }
    gil = gil_probe()
    batch, close_batch = batch_cases()
    cases = {**single, **batch}

    samples: dict[str, list[float]] = {name: [] for name in cases}
    for r in range(args.rounds):
        order = list(cases) if r % 2 == 0 else list(reversed(cases))  # alternate order: no case always first
        for name in order:
            samples[name].append(cases[name](args.seconds))
        print(f"round {r + 1}/{args.rounds} done", flush=True)
    extra = close_batch()

    s = summarize(samples)

    def med(name: str) -> float:
        return s[name]["median"]

    raw_rate = med("raw FetchReach-v4 (unwrapped)")
    seq = med("batch16: 1 core, sequential")
    derived = {
        "delayed_vs_raw_overhead": raw_rate / med(f"DelayedFetchReach k={DELAY_STEPS} (unwrapped)") - 1.0,
        "wrapper_logic_share_of_raw": raw_rate / med(f"PointReach k={DELAY_STEPS} (unwrapped)"),
        "mj_step_share_of_raw": raw_rate / med("bare mj_step x20 (same model)"),
        "mj_step_2threads_speedup": med("GIL check: mj_step x20, 2 threads (total)")
        / med("GIL check: mj_step x20, 1 thread"),
        "mj_step_2threads_vs_2processes": med("GIL check: mj_step x20, 2 threads (total)")
        / med("GIL check: mj_step x20, 2 processes (total)"),
        "batch_threads_speedup": med("batch16: 2 threads x 8 envs") / seq,
        "batch_processes_speedup": med("batch16: 2 processes x 8 envs") / seq,
        "batch_sb3_speedup": med("batch16: SB3 SubprocVecEnv (16 procs)") / seq,
    }
    result = {
        "rounds": args.rounds,
        "seconds_per_case": args.seconds,
        "steps_per_s": s,
        "derived": derived,
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
