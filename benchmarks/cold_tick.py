"""What a 25 Hz tick pays for starting cold: pieces of the cell arm's tick path, called back to back and called once
per control period after the CPU idled (or spun) in between.

A control tick runs a few hundred microseconds of Python once every 40 ms; in between, the loop waits. Side by side
in one run, per piece: hot (the same call just ran), after a 40 ms sleep, after a 40 ms sleep while holding the PM
QoS request that idle CPUs poll (``/dev/cpu_dma_latency`` = 0, as ``LoopConfig.cpu_latency_us`` does; needs root,
skipped otherwise), and after 40 ms of busy-waiting (the CPU never idles, only the wait loop runs). The conditions
take turns in blocks, so drift on the machine falls on all of them alike. The pieces: the cell policy input with the
scripted goal seeker (numpy on [1, 31] arrays), the separation barrier's cut of a command that binds (pure Python,
its root finder runs) and the safety filter on a pass-through command (numpy). Writes
benchmarks/results/cold_tick.json and .md; reports peak memory (ru_maxrss).

    .venv/bin/python benchmarks/cold_tick.py [--calls 250] [--cpu 0]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

from deploy.cell.layout import CellLayout
from deploy.cell.policy_input import PartnerInput, cell_arm_contract
from deploy.cell.scripted import GoalSeeker
from deploy.contract import fetch_reach_contract
from deploy.runtime.cpu_latency import hold_cpu_latency
from deploy.runtime.position_bound import COUPLING_SHARE
from deploy.runtime.safety import SafetyLimits, filter_action
from deploy.runtime.separation import DEFAULT_APPROACH_FRACTION, DEFAULT_MIN_SEPARATION_M
from deploy.runtime.separation_cut import Reach, separation_cut

RESULTS = Path(__file__).resolve().parent / "results"
PERIOD_S = 0.04  # the cell's control period (25 Hz)
BLOCK_CALLS = 25  # calls per condition before the next condition's turn
HOT, SLEEP, SLEEP_POLLING, SPIN = "hot", "after a 40 ms sleep", "after a 40 ms sleep, idle polling", "after 40 ms spin"
CELL_CENTRE_XY = (1.3, 0.75)  # metres: where the cell's two arms face each other (any point serves the timing)
MOVE_PER_UNIT_M = 0.05  # metres one command unit moves the arm at the planning gain
RESERVE_M = 0.0086  # the barrier's reserve on the simulated Fetch (one full command's coupling)


def _pieces() -> dict[str, Callable[[], object]]:
    """The calls timed: each is one piece of a RUN tick, on fixed inputs."""
    robot = fetch_reach_contract(3)
    arm = cell_arm_contract(robot)
    layout = CellLayout(CELL_CENTRE_XY)
    partner = layout.point_to_cell(1, (1.2, 0.7, 0.5))
    policy = PartnerInput(GoalSeeker(arm), lambda: partner, robot.state_dim, (0.0, 0.0, 0.0))
    obs = np.random.default_rng(0).random((1, robot.flat_dim), dtype=np.float32)
    reach = Reach((0.0, 0.0, 0.0), (0.01, 0.01, 0.01), [[0.02, 0.0, 0.0], [0.02, 0.01, 0.0]], COUPLING_SHARE)
    obstacles = [((0.2, -0.05, -0.05), (0.25, 0.05, 0.05)), ((0.5, 0.5, 0.5), (0.56, 0.56, 0.56))]
    limits = SafetyLimits((-5.0, -5.0, -5.0), (5.0, 5.0, 5.0), max_action_rate=2.0, action_scale_m=0.05)
    position, in_flight = np.zeros(3), np.zeros(3)
    action, previous = np.array([0.3, -0.2, 0.1, 0.0]), np.zeros(4)

    def cut() -> object:
        return separation_cut(
            reach,
            [1.0, 0.2, 0.0],
            MOVE_PER_UNIT_M,
            obstacles,
            DEFAULT_MIN_SEPARATION_M,
            DEFAULT_APPROACH_FRACTION,
            RESERVE_M,
        )

    if not cut()[1]:
        raise RuntimeError("the timed cut passes unchanged: its inputs must make it bind (the root finder is timed)")
    return {
        "policy input + goal seeker (numpy)": lambda: policy(obs),
        "separation cut that binds (pure Python)": cut,
        "safety filter, pass-through (numpy)": lambda: filter_action(
            position, in_flight, action, previous, 0.0, limits, None
        ),
    }


def _wait(condition: str) -> None:
    if condition in (SLEEP, SLEEP_POLLING):
        time.sleep(PERIOD_S)
    elif condition == SPIN:
        end = time.perf_counter() + PERIOD_S
        while time.perf_counter() < end:
            pass


def _hold_polling() -> Callable[[], None] | None:
    """The runtime's PM QoS request that idle CPUs poll (``hold_cpu_latency(0)``): its release, or None where it
    cannot be held (not root)."""
    try:
        return hold_cpu_latency(0)
    except OSError:
        return None


def run(calls: int) -> dict[str, dict[str, dict[str, float]]]:
    """Per condition and piece: p50 / p90 / p99 of one call (microseconds), ``calls`` calls each (rounded down to
    whole blocks, at least one)."""
    pieces = _pieces()
    conditions = [HOT, SLEEP, SLEEP_POLLING, SPIN]
    samples: dict[str, dict[str, list[float]]] = {c: {name: [] for name in pieces} for c in conditions}
    polling_held = True
    for _ in range(max(1, calls // BLOCK_CALLS)):
        for condition in conditions:
            release = _hold_polling() if condition == SLEEP_POLLING else None
            if condition == SLEEP_POLLING and release is None:
                polling_held = False
                continue
            try:
                for name, call in pieces.items():
                    call()  # untimed: the hot condition's "just ran"; the others wait after it
                    for _ in range(BLOCK_CALLS):
                        _wait(condition)
                        t0 = time.perf_counter()
                        call()
                        samples[condition][name].append(time.perf_counter() - t0)
            finally:
                if release is not None:
                    release()
    out: dict[str, dict[str, dict[str, float]]] = {}
    for condition, by_piece in samples.items():
        if condition == SLEEP_POLLING and not polling_held:
            continue
        out[condition] = {}
        for name, values in by_piece.items():
            p50, p90, p99 = np.percentile(np.asarray(values) * 1e6, [50, 90, 99])
            out[condition][name] = {"p50_us": float(p50), "p90_us": float(p90), "p99_us": float(p99), "n": len(values)}
    return out


def write(results: dict, path: Path) -> None:
    conditions = results["conditions"]
    pieces = list(next(iter(conditions.values())))
    lines = [
        "# A 25 Hz tick's pieces, hot and cold (benchmarks/cold_tick.py)",
        "",
        f"Machine: {results['machine']}; pinned to CPU {results['cpu']}, normal priority; {results['calls']} calls per "
        f"condition and piece, the conditions taking turns in blocks of {BLOCK_CALLS}; peak RSS "
        f"{results['peak_rss_mb']:.0f} MB. One call's time, microseconds, p50 / p99.",
        "",
        "| piece | " + " | ".join(conditions) + " | cold / hot (p50, after a sleep) |",
        "|---|" + "---|" * (len(conditions) + 1),
    ]
    for name in pieces:
        cells = [f"{conditions[c][name]['p50_us']:.1f} / {conditions[c][name]['p99_us']:.1f}" for c in conditions]
        ratio = conditions[SLEEP][name]["p50_us"] / conditions[HOT][name]["p50_us"]
        lines.append(f"| {name} | " + " | ".join(cells) + f" | {ratio:.0f}x |")
    lines += ["", f"Command: `{results['command']}`", ""]
    path.write_text("\n".join(lines))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=250, help="timed calls per condition and piece")
    parser.add_argument("--cpu", type=int, default=0, help="the CPU to pin to (as a cell arm's runtime is)")
    parser.add_argument("--out", default="cold_tick", help="results file stem")
    args = parser.parse_args()
    if args.calls < 1:
        parser.error("--calls must be >= 1")
    os.sched_setaffinity(0, {args.cpu})
    conditions = run(args.calls)
    results = {
        "machine": f"{platform.node()} ({platform.machine()}, {os.cpu_count()} cores)",
        "cpu": args.cpu,
        "calls": args.calls,
        "conditions": conditions,
        "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        "command": f"benchmarks/cold_tick.py --calls {args.calls} --cpu {args.cpu}",
    }
    out = RESULTS / args.out
    out.with_suffix(".json").write_text(json.dumps(results, indent=2))
    write(results, out.with_suffix(".md"))
    print(out.with_suffix(".md").read_text())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
