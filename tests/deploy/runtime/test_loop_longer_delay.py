"""A robot whose delay grew after training (3 steps in flight, policy history 2): the loop keeps running.

The policy sees the newest 2 of the 3 commands in flight, exactly as the simulator shows them
(``DelayedFetchReachEnv(delay=3, history_len=2)``), and the barrier counts all 3.
"""

import numpy as np
import pytest
from loop_fixtures import CONTRACT, FAST_PERIOD_S, WIDE_BOX, DelayAwareP, limits, run_loop, seeded_goals

from deploy.runtime.loop import Controller, LoopConfig
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
    run = run_loop(DelayAwareP(), seeded_goals(seeds), config, limits(WIDE_BOX), robot=robot)
    flats = run.episode_flats()
    assert sorted(flats) == [0, 1]
    for episode, want in enumerate(expected):
        assert flats[episode].tobytes() == want.tobytes(), f"episode {episode} differs"
    assert run.report.counts["line_longer_than_history"] > 0


def test_barrier_counts_every_command_in_flight():
    """Three commands in flight, history of two: the barrier's displacement sums all three."""
    from deploy.wire import StateMsg

    controller = Controller("loop://", CONTRACT, DelayAwareP(), limits(WIDE_BOX), seeded_goals([0]))
    commands = {7: [1.0, 0.0, 0.0, 0.0], 8: [0.0, 1.0, 0.0, 0.0], 9: [0.0, 0.0, -1.0, 0.0]}
    for seq, command in commands.items():
        controller._sent[seq] = np.array(command)
    controller._acked_seq = 6
    state = np.zeros(CONTRACT.state_dim)
    controller._sync_history(StateMsg(seq=1, t_s=0.0, state=state, pending=(7, 8, 9)))
    # History (what the policy sees): the newest two, oldest first.
    np.testing.assert_array_equal(controller._history.get_state(), [commands[8], commands[9]])
    # In flight: 0.05 m along +x, +y and -z (one unit each at 0.05 m per unit).
    np.testing.assert_allclose(controller._pending_displacement(), [0.05, 0.05, -0.05])


def test_a_line_shorter_than_the_history_is_refused():
    from deploy.wire import StateMsg

    controller = Controller("loop://", CONTRACT, DelayAwareP(), limits(WIDE_BOX), seeded_goals([0]))
    state = np.zeros(CONTRACT.state_dim)
    with pytest.raises(ValueError, match="reports 1 commands in flight; the policy was trained with a history of 2"):
        controller._sync_history(StateMsg(seq=1, t_s=0.0, state=state, pending=(5,)))
