"""The command path alone: in a cell, the partner is polled on the loop's thread just before the policy is asked
(the policy, on its worker thread, reads only what that poll kept), and the barrier cuts the filtered command last."""

from __future__ import annotations

from collections import Counter

import numpy as np

from deploy.contract import fetch_reach_contract
from deploy.runtime.command_line import CommandLine
from deploy.runtime.command_path import CommandPath
from deploy.runtime.policy_guard import PolicyGuard
from deploy.runtime.safety import FilterResult, SafetyLimits

CONTRACT = fetch_reach_contract(2)
LIMITS = SafetyLimits((-5.0, -5.0, -5.0), (5.0, 5.0, 5.0), max_action_rate=2.0, action_scale_m=0.05)
CUT = "cut_by_the_fake_barrier"


class FakeBarrier:
    """Records the order of what the path asks of it; the partner it hands out is numbered by the polls."""

    def __init__(self, calls: list[str]) -> None:
        self.calls = calls
        self.polls = 0

    def poll_partner(self) -> int:
        self.polls += 1
        self.calls.append("poll_partner")
        return self.polls

    def partner_position(self) -> int:  # what the policy reads (the newest poll)
        return self.polls

    def cut(self, result: FilterResult, bound, poll: bool = True) -> FilterResult:
        self.calls.append("cut polls" if poll else "cut")
        return FilterResult(result.action * 0.5, (*result.reasons, CUT), result.stop)


def test_the_partner_is_polled_before_the_policy_is_asked_and_the_cut_comes_last() -> None:
    calls: list[str] = []
    barrier = FakeBarrier(calls)
    seen: list[int] = []

    def policy(batch: np.ndarray) -> np.ndarray:
        calls.append("policy")
        seen.append(barrier.partner_position())
        return np.full((1, CONTRACT.action_dim), 0.2, dtype=np.float32)

    line = CommandLine(CONTRACT, delay_steps=2, counts=Counter())
    guard = PolicyGuard(policy, CONTRACT.action_dim, 0.04)
    path = CommandPath(CONTRACT, LIMITS, line, guard, separation=barrier)  # type: ignore[arg-type]
    flat = np.zeros(CONTRACT.flat_dim, dtype=np.float32)
    bound = ((0.0, 0.0, 0.0), (0.0, 0.0, 0.0))
    for tick in (1, 2):
        proposal = path.propose(flat, bound, np.zeros(3), 0.0, 0.04)
        assert seen[-1] == tick  # the policy read the partner polled this tick, not the tick before's
        assert proposal.result.reasons[-1] == CUT
        assert proposal.result.action[0] == np.float64(np.float32(0.2)) * 0.5
    assert calls == ["poll_partner", "policy", "cut"] * 2  # the cut plans with the report polled before the policy


def test_a_tick_reads_the_partner_before_its_state_and_a_filter_without_the_policy_polls_in_the_cut() -> None:
    calls: list[str] = []
    barrier = FakeBarrier(calls)
    line = CommandLine(CONTRACT, delay_steps=2, counts=Counter())
    guard = PolicyGuard(lambda b: np.zeros((1, CONTRACT.action_dim), np.float32), CONTRACT.action_dim, 0.04)
    path = CommandPath(CONTRACT, LIMITS, line, guard, separation=barrier)  # type: ignore[arg-type]
    path.before_state()  # the window opens: the reports that came in since the last tick are read now
    assert calls == ["poll_partner"]
    # a retract's or a stale state's command: no policy call polled this tick's link, so the cut does
    path.filtered(np.zeros(CONTRACT.action_dim), None, np.zeros(3), 0.0)
    assert calls == ["poll_partner", "cut polls"]


def test_an_arm_alone_has_nothing_to_read_before_its_state() -> None:
    line = CommandLine(CONTRACT, delay_steps=2, counts=Counter())
    guard = PolicyGuard(lambda b: np.zeros((1, CONTRACT.action_dim), np.float32), CONTRACT.action_dim, 0.04)
    CommandPath(CONTRACT, LIMITS, line, guard).before_state()  # no barrier: nothing to poll, nothing raised


def test_an_arm_alone_polls_nothing() -> None:
    line = CommandLine(CONTRACT, delay_steps=2, counts=Counter())
    guard = PolicyGuard(lambda b: np.zeros((1, CONTRACT.action_dim), np.float32), CONTRACT.action_dim, 0.04)
    path = CommandPath(CONTRACT, LIMITS, line, guard)
    result = path.propose(np.zeros(CONTRACT.flat_dim, np.float32), None, np.zeros(3), 0.0, 0.04).result
    assert not result.action.any() and not result.stop
