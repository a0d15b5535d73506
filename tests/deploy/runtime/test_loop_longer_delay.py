"""A robot whose delay grew after training (3 steps in flight, policy history 2): the loop keeps running.

The policy sees the newest 2 of the 3 commands in flight, exactly as the simulator shows them
(``DelayedFetchReachEnv(delay=3, history_len=2)``), and the barrier counts all 3.
"""

from collections import Counter
from dataclasses import replace

import numpy as np
import pytest
from loop_fixtures import CONTRACT, FAST_PERIOD_S, WIDE_BOX, DelayAwareP, robot_spec, run_loop, seeded_goals

from deploy.runtime.command_line import CommandLine
from deploy.runtime.loop import LoopConfig
from envs.delayed_fetch_reach import DelayedFetchReachEnv
from envs.sim_robot import SimRobot

STEPS = 20
ROBOT_DELAY = 3  # the policy's contract has a history of 2 (loop_fixtures.CONTRACT)


def pure_sim_flats(policy, seeds):
    env = DelayedFetchReachEnv(delay=ROBOT_DELAY, history_len=2)
    out = []
    for seed in seeds:
        obs, _ = env.reset(seed=seed)
        flats = []
        for _ in range(STEPS):
            flat = env.contract.flatten(obs)
            flats.append(flat)
            obs, *_ = env.step(np.asarray(policy(flat[None, :]), dtype=np.float64)[0])
        out.append(np.stack(flats))
    env.close()
    return out


def test_longer_robot_delay_matches_the_sim_bit_for_bit():
    seeds = [3, 4]
    expected = pure_sim_flats(DelayAwareP(), seeds)
    config = LoopConfig(period_s=FAST_PERIOD_S, max_episode_steps=STEPS, max_ticks=200)
    robot = SimRobot(mode="lockstep", delay=ROBOT_DELAY)
    # the barrier at the gain bound itself: with the spec's margin for motors faster than calibrated, four commands
    # counted in flight brake this reach toward the table, 11 cm below home, and the runtime no longer matches the sim
    spec = replace(robot_spec(WIDE_BOX), barrier_gain_margin=1.0)
    run = run_loop(DelayAwareP(), seeded_goals(seeds), config, spec, robot=robot)
    flats = run.episode_flats()
    assert sorted(flats) == [0, 1]
    for episode, want in enumerate(expected):
        assert flats[episode].tobytes() == want.tobytes(), f"episode {episode} differs"
    assert run.report.counts["line_longer_than_history"] > 0


def test_barrier_counts_every_command_in_flight():
    """Three commands in flight, history of two: the barrier's displacement sums all three."""
    line = CommandLine(CONTRACT, delay_steps=2, counts=Counter())
    commands = {7: [1.0, 0.0, 0.0, 0.0], 8: [0.0, 1.0, 0.0, 0.0], 9: [0.0, 0.0, -1.0, 0.0]}
    for seq, command in commands.items():
        line.sent(seq, np.array(command), robot_reports_line=True)
    line.sync((7, 8, 9))
    # History (what the policy sees): the newest two, oldest first.
    np.testing.assert_array_equal(line.history.get_state(), [commands[8], commands[9]])
    # In flight: 0.05 m along +x, +y and -z (one unit each at 0.05 m per unit).
    np.testing.assert_allclose(line.displacement_m(), [0.05, 0.05, -0.05])
    assert line.counts["line_longer_than_history"] == 1


def test_commands_not_yet_reported_count_too():
    line = CommandLine(CONTRACT, delay_steps=2, counts=Counter())
    for seq in (1, 2, 3):
        line.sent(seq, np.array([1.0, 0.0, 0.0, 0.0]), robot_reports_line=True)
    line.sync((1, 2))  # the robot has seen 1 and 2; 3 is on the wire
    # 2 reported + 1 unreported = 3 x 0.05 m along x.
    np.testing.assert_allclose(line.displacement_m(), [0.15, 0.0, 0.0])


def test_a_line_shorter_than_the_history_is_refused():
    line = CommandLine(CONTRACT, delay_steps=2, counts=Counter())
    with pytest.raises(ValueError, match="reports 1 commands in flight; the policy was trained with a history of 2"):
        line.sync((5,))
