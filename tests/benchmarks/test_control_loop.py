"""benchmarks/control_loop.py's stand-in checker (checks=off) keeps the interface the state intake reads: the
benchmark's row without checks broke once when the intake began reading the checker's anchor. Runs that differ only
in the CPU idle latency request stay apart in the table."""

from __future__ import annotations

from collections import Counter

import numpy as np

from benchmarks.control_loop import UncheckedStates, markdown, median_runs
from deploy.contract import fetch_reach_contract
from deploy.robot_spec import load_robot_spec
from deploy.runtime.command_line import CommandLine
from deploy.runtime.loop_config import LoopConfig
from deploy.runtime.state_intake import StateIntake
from deploy.wire import StateFlags, StateMsg

PERIOD_S = 0.04


def test_the_intake_runs_on_the_unchecked_stand_in_and_believes_every_state() -> None:
    spec = load_robot_spec()
    contract = fetch_reach_contract(spec.delay_range[1])
    counts: Counter[str] = Counter()
    line = CommandLine(contract, spec.delay_range[1], counts)
    intake = StateIntake(spec, contract, PERIOD_S, LoopConfig(), line, counts, checker_class=UncheckedStates)
    state = np.zeros(contract.state_dim)
    state[slice(*contract.position_slice)] = spec.home_position_m
    assert intake.check(StateMsg(1, 0.0, state, int(StateFlags.HOMED), (0, 0)), 0.001, 1).accepted
    line.sent(2, np.array([1.0, 0.0, 0.0, 0.0]), robot_reports_line=True)
    far = state.copy()
    far[slice(*contract.position_slice)] += 0.003  # believed wherever it is
    assert intake.check(StateMsg(3, PERIOD_S, far, 0, (0, 2)), PERIOD_S + 0.001, 2).accepted


def _run(p99_s: float, hold: int | None) -> dict:
    keys = ("latency_s", "jitter_s")
    timing = {f"{k}_{stat}": p99_s for k in keys for stat in ("p50", "p99", "max")}
    timing.update(latency_s_n=10, robot_jitter_s_p99=0.0, wake_late_s_p99=0.0, overruns=0)
    return {
        "timing": timing,
        "rate_hz": 25.0,
        "scheduler": "default",
        "ticklog": True,
        "checks": True,
        "telemetry": False,
        "cpu_latency_us": hold,
        "counts": {},
        "ru_maxrss_mb": 70.0,
        "vm_hwm_mb": 70.0,
        "heavy_modules_loaded": [],
    }


def test_runs_with_and_without_the_cpu_latency_request_are_two_rows() -> None:
    runs = [_run(1.2e-3, None), _run(0.7e-3, 0), _run(1.0e-3, None), _run(0.8e-3, 0), _run(1.1e-3, None)]
    rows = median_runs(runs)
    assert [(r["cpu_latency_us"], r["timing"]["latency_s_p99"]) for r in rows] == [(None, 1.1e-3), (0, 0.8e-3)]
    meta = {
        "policy": "p",
        "seconds": 1,
        "repeats": 3,
        "machine": "m",
        "loadavg": "0",
        "cpu_busy_pct": 0.0,
        "pty_baseline": [],
        "orchestrator_rss_mb": 1.0,
    }
    table = markdown(rows, meta)
    assert "| not asked | 10 | 1.100 | 1.100 |" in table
    assert "| <= 0 us | 10 | 0.800 | 0.800 |" in table
