"""TickStats: what counts as a sample of latency, command jitter, robot jitter and an overrun (seconds)."""

from __future__ import annotations

import pytest

from deploy.runtime.timing import RingSamples, TickStats
from deploy.wire import SEQ_MAX

PERIOD_S = 0.04


def test_latency_and_overruns():
    stats = TickStats(PERIOD_S)
    stats.on_command(0, t_in=1.0, t_out=1.0005)
    stats.on_command(1, t_in=1.04, t_out=1.04 + 1.5 * PERIOD_S)  # answered after the robot's next step
    summary = stats.summary()
    assert summary["latency_s_n"] == 2 and summary["latency_s_max"] == pytest.approx(1.5 * PERIOD_S)
    assert summary["overruns"] == 1


def test_command_jitter_only_between_commands_of_consecutive_ticks_of_one_episode():
    stats = TickStats(PERIOD_S)
    stats.on_command(0, 0.0, 0.001)
    stats.on_command(1, 0.04, 0.046)  # 5 ms late
    stats.on_command(3, 0.12, 0.121)  # a tick without a command in between: no sample
    stats.on_command(4, 0.16, 0.161, restart=True)  # the first command of an episode: no sample
    assert stats.jitter.values().tolist() == pytest.approx([0.005])


@pytest.mark.parametrize("first_seq", [100, SEQ_MAX])  # SEQ_MAX -> 1 is consecutive too
def test_robot_jitter_between_consecutive_states_also_across_the_wrap(first_seq: int):
    stats = TickStats(PERIOD_S)
    second = first_seq % SEQ_MAX + 1
    stats.on_robot_state(first_seq, 2.0)
    stats.on_robot_state(second, 2.0 + PERIOD_S + 0.003)
    stats.on_robot_state(second + 5, 2.5)  # a gap in the numbering: no sample
    assert stats.robot_jitter.values().tolist() == pytest.approx([0.003])


def test_the_state_after_a_home_starts_a_new_robot_clock():
    stats = TickStats(PERIOD_S)
    stats.on_robot_state(7, 3.0)
    stats.on_robot_state(8, 0.01, restarted=True)  # the robot restarted its period clock at HomeMsg
    assert stats.robot_jitter.count == 0  # 3.0 s -> 0.01 s is no period of one clock


def test_ring_samples_keep_the_last_capacity_values_and_the_run_maximum():
    ring = RingSamples(capacity=3)
    for value in (5.0, 1.0, 2.0, 3.0):
        ring.add(value)
    assert sorted(ring.values().tolist()) == [1.0, 2.0, 3.0] and ring.max == 5.0 and ring.count == 4
    with pytest.raises(ValueError, match="capacity"):
        RingSamples(0)
