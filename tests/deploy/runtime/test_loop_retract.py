"""RETRACT in the control loop, on the lock-step simulated robot: after each episode the loop drives the gripper
back toward the spec's home through the filter, then HOMEs; the episode is judged before it; a short budget ends it
short of home (counted); a spec without a home refuses a retract."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from deploy.runtime.loop import Controller, LoopConfig
from deploy.runtime.retract import RETRACT_STEPS, RETRACTS_COMPLETE, RETRACTS_INCOMPLETE
from deploy.runtime.state_machine import LoopState
from tests.deploy.runtime.loop_fixtures import (
    ABOVE_TABLE_SEEDS,
    CONTRACT,
    FAST_PERIOD_S,
    DelayAwareP,
    robot_spec,
    run_loop,
    seeded_goals,
)

SEEDS = ABOVE_TABLE_SEEDS[:2]
STEPS = 20


def _config(retract_steps: int) -> LoopConfig:
    return LoopConfig(period_s=FAST_PERIOD_S, max_episode_steps=STEPS, retract_max_steps=retract_steps)


def _transitions(report) -> list[tuple[LoopState, LoopState]]:
    return [(t.source, t.target) for t in report.transitions]


def test_each_episode_retracts_to_home_before_the_next_home() -> None:
    spec = robot_spec()
    home = np.asarray(spec.home_position_m)
    positions: list[tuple[LoopState, np.ndarray]] = []

    def watch(controller: Controller, record) -> None:
        if record is not None and record.state.size:
            positions.append((controller.sm.state, record.state[:3].copy()))

    run = run_loop(DelayAwareP(), seeded_goals(SEEDS), _config(60), spec, on_tick=watch)
    plain = run_loop(DelayAwareP(), seeded_goals(SEEDS), _config(0), spec)
    counts = run.report.counts
    assert counts[RETRACTS_COMPLETE] == len(SEEDS) and counts.get(RETRACTS_INCOMPLETE, 0) == 0
    assert counts[RETRACT_STEPS] > 0
    moves = _transitions(run.report)
    assert moves.count((LoopState.RUN, LoopState.RETRACT)) == len(SEEDS)
    assert (LoopState.RETRACT, LoopState.HOMING) in moves
    assert (LoopState.RUN, LoopState.RETRACT) not in _transitions(plain.report)
    # the retract's ticks close on home; the last one it commanded from is within reach of the tolerance
    retracting = [np.linalg.norm(p - home) for state, p in positions if state is LoopState.RETRACT]
    assert retracting and min(retracting) < 0.05
    # the episodes are judged at their last policy step, as without a retract
    judged = [(e.success, round(e.final_distance_m, 9)) for e in run.report.episodes]
    assert judged == [(e.success, round(e.final_distance_m, 9)) for e in plain.report.episodes]


def test_a_retract_that_spends_its_steps_homes_anyway_and_says_so() -> None:
    run = run_loop(DelayAwareP(), seeded_goals(SEEDS), _config(1), robot_spec())
    counts = run.report.counts
    assert counts[RETRACTS_INCOMPLETE] == len(SEEDS) and counts[RETRACT_STEPS] == len(SEEDS)
    assert len(run.report.episodes) == len(SEEDS) and not any(e.aborted for e in run.report.episodes)


def test_a_retract_needs_the_specs_home() -> None:
    spec = replace(robot_spec(), home_position_m=None)
    with pytest.raises(ValueError, match="home.position_m"):
        Controller("loop://", CONTRACT, DelayAwareP(), spec, seeded_goals(SEEDS), _config(10))
