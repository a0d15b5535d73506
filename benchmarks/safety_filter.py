"""Cost of one safety-filter call and one state check (both run inside the 250 Hz control tick) and of one
tick-log append.

Side by side in one run: the filter on a pass-through action, on an action cut by clip + barrier, on a NaN
hold, with position bounds; the state checker on an accepted state and on a rejected one (a 3 cm glitch); the
tick-log append (write only, the fsync runs in a background thread). Writes benchmarks/results/safety_filter.json
and .md; reports peak memory (ru_maxrss).

    .venv/bin/python benchmarks/safety_filter.py [--calls 20000]
"""

from __future__ import annotations

import argparse
import json
import platform
import resource
import tempfile
import time
from pathlib import Path

import numpy as np

from deploy.contract import fetch_reach_contract
from deploy.robot_spec import load_robot_spec
from deploy.runtime.safety import SafetyLimits, filter_action
from deploy.runtime.state_check import StateChecker
from deploy.runtime.tick_record import TickRecord
from deploy.runtime.ticklog import TickLogWriter
from deploy.wire import StateMsg

RESULTS = Path(__file__).resolve().parent / "results"
WARMUP_CALLS = 1000


def _percentiles_us(samples_s: list[float]) -> dict[str, float]:
    arr = np.asarray(samples_s) * 1e6
    return {
        "p50_us": float(np.percentile(arr, 50)),
        "p99_us": float(np.percentile(arr, 99)),
        "max_us": float(arr.max()),
    }


def _time_calls(fn, calls: int) -> dict[str, float]:
    for _ in range(WARMUP_CALLS):
        fn()
    samples = []
    clock = time.perf_counter
    for _ in range(calls):
        t0 = clock()
        fn()
        samples.append(clock() - t0)
    return _percentiles_us(samples)


def _state_check_rows(calls: int) -> dict[str, dict[str, float]]:
    """StateChecker.check on a state 1 cm from its anchor with one command applied: accepted, and the same state
    shifted 3 cm (rejected as unexplained motion). Each call checks against a fresh copy of the same anchor."""
    spec, contract = load_robot_spec(), fetch_reach_contract(2)
    checker = StateChecker(spec, contract, loop_period_s=contract.control_period_s)
    state = np.zeros(contract.state_dim)
    state[:3] = (1.3, 0.75, 0.6)
    anchor = StateMsg(1, 10.0, state, 0, (0, 0))
    moved, glitched = state.copy(), state.copy()
    moved[0] += 0.01
    glitched[0] += 0.04
    applied_units = 0.3  # one command of 0.3 units applied since the anchor
    for_sure = [[0.3, 0.0, 0.0]]  # ... which the line shows applied (the arm must follow it: the loop passes it)
    rows = {}
    cases = (
        ("state check: accepted", moved, for_sure),
        ("state check: accepted, following not judged", moved, None),
        ("state check: rejected (3 cm glitch)", glitched, for_sure),
    )
    for name, values, applied in cases:
        msg = StateMsg(2, 10.04, values, 0, (0, 5))

        def check(msg: StateMsg = msg, applied: list[list[float]] | None = applied) -> None:
            checker.reset()
            checker.check(anchor, 10.0001, 0.0)
            checker.check(msg, 10.0401, applied_units, applied_for_sure=applied)

        rows[f"{name} (with the anchor's check and a reset)"] = _time_calls(check, calls)
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--calls", type=int, default=20000)
    args = parser.parse_args()

    limits = SafetyLimits((1.05, 0.40, 0.40), (1.65, 1.10, 0.95), 1.0, 0.5, 0.5, 0.05)
    pos = np.array([1.3, 0.75, 0.6])
    near_face = np.array([1.64, 0.75, 0.6])
    pending = np.array([0.002, -0.001, 0.0])
    prev = np.array([0.1, 0.0, 0.0, 0.0])
    cases = {
        "filter: pass-through": lambda: filter_action(
            pos, pending, np.array([0.2, -0.1, 0.05, 0.0]), prev, 0.01, limits
        ),
        "filter: clip + rate + barrier": lambda: filter_action(
            near_face, pending, np.array([3.0, -0.1, 0.05, 0.0]), prev, 0.01, limits
        ),
        "filter: NaN hold": lambda: filter_action(pos, pending, np.array([np.nan, 0, 0, 0]), prev, 0.01, limits),
        "filter: with position bounds": lambda: filter_action(
            near_face, pending, np.array([3.0, -0.1, 0.05, 0.0]), prev, 0.01, limits, (near_face - 0.01, near_face)
        ),
    }
    rows = {name: _time_calls(fn, args.calls) for name, fn in cases.items()}
    rows.update(_state_check_rows(args.calls))

    record = TickRecord(
        t_s=0.0,
        tick=0,
        state=np.zeros(10),
        obs_flat=np.zeros(24, dtype=np.float32),
        goal=np.zeros(3),
        proposed=np.zeros(4),
        sent=np.zeros(4),
        reasons=("clip",),
        latency_s=1e-4,
        jitter_s=1e-5,
        episode_id=0,
    )
    with tempfile.TemporaryDirectory() as tmp:
        writer = TickLogWriter(Path(tmp) / "ticks.mcap", fsync_interval_s=1.0, max_bytes=64 << 20)
        rows["ticklog: append (fsync in background)"] = _time_calls(lambda: writer.append(record), args.calls)
        writer.close()

    peak_mib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    out = {"calls": args.calls, "machine": platform.platform(), "python": platform.python_version(), "rows": rows}
    out["peak_rss_mib"] = peak_mib
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "safety_filter.json").write_text(json.dumps(out, indent=2))
    lines = [
        f"# Safety filter and tick log cost ({args.calls} calls each, {platform.machine()}, "
        f"peak RSS {peak_mib:.0f} MiB)",
        "",
        "| case | p50 (us) | p99 (us) | max (us) |",
        "|---|---|---|---|",
    ]
    lines += [f"| {n} | {r['p50_us']:.1f} | {r['p99_us']:.1f} | {r['max_us']:.1f} |" for n, r in rows.items()]
    (RESULTS / "safety_filter.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
