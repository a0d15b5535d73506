"""Closed loop with the shipped policy package: real-time SimRobot over a pty vs the same policy in pure sim.

Runs only when ``models/default`` (or the folder in ``ROBOT_GRPO_PACKAGE``) holds a policy package. By default the
simulated robot answers in lock step and the loop ticks every 10 ms (the loop's logic, filter and checks are the same
at any rate; ``tests/deploy/runtime/test_loop.py`` covers real time at 25 Hz). ``ROBOT_GRPO_LOOP_REALTIME=1`` runs
it in real time at the contract's 25 Hz instead (about 2 s an episode). The number of seeded goals is
``ROBOT_GRPO_LOOP_EPISODES`` (default 100):

    ROBOT_GRPO_LOOP_REALTIME=1 .venv/bin/pytest tests/deploy/runtime/test_loop_package.py -s

Pass: the loop's success rate is within 3 percentage points of pure sim over the same seeded goals (both printed).
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest
from loop_fixtures import pure_sim, run_loop, seeded_goals

from deploy.robot_spec import load_robot_spec
from deploy.runtime.loop import LoopConfig
from envs.sim_robot import SimRobot

PACKAGE = Path(os.environ.get("ROBOT_GRPO_PACKAGE", Path(__file__).resolve().parents[3] / "models" / "default"))
EPISODES = int(os.environ.get("ROBOT_GRPO_LOOP_EPISODES", "100"))
EPISODE_STEPS = 50  # FetchReach's episode length, as in the package's evaluation
MAX_GAP = 0.03  # success-rate points between the loop and pure sim
REALTIME = os.environ.get("ROBOT_GRPO_LOOP_REALTIME", "") == "1"
LOCKSTEP_PERIOD_S = 0.01  # the loop's period against the lock-step robot


@pytest.mark.slow
@pytest.mark.skipif(not (PACKAGE / "manifest.json").is_file(), reason="models/default (a policy package) is absent")
def test_package_success_matches_pure_sim():
    from deploy.runtime.package import load_package

    package = load_package(PACKAGE)
    delay = package.action_delay_steps[1]
    if package.action_delay_steps[0] != delay:
        pytest.skip(f"package trained on a delay range {package.action_delay_steps}; this test needs a fixed delay")
    backend = package.make_backend("ort-cpu", "fp32")
    seeds = list(range(EPISODES))

    sim = pure_sim(backend, seeds, EPISODE_STEPS, delay=delay)
    sim_rate = float(np.mean(sim.success))

    spec = load_robot_spec()
    ticks = EPISODES * (EPISODE_STEPS + 4) + 50
    if REALTIME:
        config = LoopConfig(max_episode_steps=EPISODE_STEPS, max_ticks=ticks)
        robot = SimRobot(mode="realtime", delay=delay)
    else:
        config = LoopConfig(period_s=LOCKSTEP_PERIOD_S, max_episode_steps=EPISODE_STEPS, max_ticks=ticks)
        robot = SimRobot(mode="lockstep", delay=delay, control_period_s=LOCKSTEP_PERIOD_S)
    run = run_loop(backend, seeded_goals(seeds, delay=delay), config, spec, robot=robot)
    report = run.report
    loop_rate = report.success_rate
    print(
        f"\npolicy package {PACKAGE}: pure sim success {sim_rate:.3f}, closed loop over a pty {loop_rate:.3f} "
        f"({len(report.episodes)} episodes, delay {delay}); interventions {report.interventions}; "
        f"timing p99 latency {report.timing['latency_s_p99'] * 1e3:.3f} ms, overruns {report.timing['overruns']:.0f}"
    )
    assert len(report.episodes) == EPISODES
    assert abs(loop_rate - sim_rate) <= MAX_GAP
