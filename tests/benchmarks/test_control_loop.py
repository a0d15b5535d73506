"""benchmarks/control_loop.py's stand-in checker (checks=off) keeps the interface the state intake reads: the
benchmark's row without checks broke once when the intake began reading the checker's anchor."""

from __future__ import annotations

from collections import Counter

import numpy as np

from benchmarks.control_loop import UncheckedStates
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
