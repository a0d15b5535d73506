"""The separation barrier alone (its geometry and cut: test_separation_cut.py): the partner's report growing with its
age, the partner's home kept out, a stale or unknown partner holding the arm, the policy reading the partner the
loop polled, and two barriers keeping two point arms apart under random timing and actuator gains (the argument of
the module docstring, run)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from deploy.cell.layout import CellLayout
from deploy.cell.report import PositionReport
from deploy.runtime.position_bound import COUPLING_SHARE
from deploy.runtime.safety import CLIP, FilterResult, SafetyLimits
from deploy.runtime.separation import (
    HOME_WAITS,
    PARTNER_STALE,
    SEPARATION_BARRIER,
    SEPARATION_INSIDE,
    SeparationBarrier,
    SeparationConfig,
)

MIN_SEP = 0.1
MOVE = 0.05  # metres per command unit at the gain bound
LAYOUT = CellLayout((1.0, 0.0))  # arm 1 stands mirrored through (1, 0)
PERIOD = 0.04
# 1 m box each way, 0.05 m per unit at gain 1: the filter's own limits do not interfere
LIMITS = SafetyLimits((-5.0, -5.0, -5.0), (5.0, 5.0, 5.0), max_action_rate=2.0, action_scale_m=0.05)


# The part, with in-memory stand-ins for its link and the controller's parts ------------------------------------
class Board:
    """An in-memory supervisor: each arm's newest report."""

    def __init__(self) -> None:
        self.reports: dict[int, PositionReport] = {}


class BoardLink:
    def __init__(self, arm: int, board: Board) -> None:
        self.arm, self.board = arm, board

    def send(self, report: PositionReport) -> None:
        self.board.reports[self.arm] = report

    def poll(self) -> PositionReport | None:
        return self.board.reports.get(1 - self.arm)


class State:
    def __init__(self, position: list[float]) -> None:
        self.state = np.array(position + [0.0] * 7)


class Intake:
    def __init__(self, position: list[float] | None) -> None:
        self.set(position)

    def set(self, position: list[float] | None) -> None:
        self.anchor = None if position is None else State(position)
        self.bounds = None if position is None else (tuple(position), tuple(position))


class Line:
    def __init__(self) -> None:
        self.commands: list[list[float]] = []

    def in_flight_moves(self) -> list[list[float]]:
        return [command[:3] for command in self.commands]


class Clock:
    def __init__(self) -> None:
        self.t = 100.0

    def __call__(self) -> float:
        return self.t


class Episodes:
    def __init__(self) -> None:
        self.ended = 0


def make_arm(
    arm: int, board: Board, clock: Clock, position: list[float] | None, episodes: Episodes | None = None, **kwargs
) -> tuple:
    config = SeparationConfig(arm, LAYOUT, min_separation_m=MIN_SEP, **kwargs)
    barrier = SeparationBarrier(config, BoardLink(arm, board), clock)
    intake, line = Intake(position), Line()
    barrier.attach(LIMITS, PERIOD, (0, 3), intake, line, episodes)
    return barrier, intake, line


def result(action: list[float], *reasons: str) -> FilterResult:
    return FilterResult(np.array(action, dtype=np.float64), reasons, False)


def test_a_stale_missing_or_unknown_partner_holds_and_a_fresh_one_resumes() -> None:
    board, clock = Board(), Clock()
    arm0, intake0, _ = make_arm(0, board, clock, [0.0, 0.0, 0.0], stale_s=0.12)
    arm1, intake1, _ = make_arm(1, board, clock, None)
    move = result([0.5, 0.0, 0.0, 0.0], CLIP)
    bound = intake0.bounds
    held = arm0.cut(move, bound)  # no report from arm 1 yet
    assert held.reasons == (CLIP, PARTNER_STALE) and not held.action.any()
    arm1.sent(np.zeros(4))  # arm 1 does not know where it is: known=False
    assert arm0.cut(move, bound).reasons[-1] == PARTNER_STALE
    intake1.set([1.0, 0.0, 0.0])  # arm 1's frame; the cell frame's (1, 0, 0) too (the centre maps to itself)
    clock.t += 0.001
    arm1.sent(np.zeros(4))
    # arm 1 at cell (1, 0, 0): 1 m from arm 0; a 0.025 m move passes
    assert arm0.cut(move, bound).reasons == (CLIP,)
    clock.t += 0.121  # older than stale_s
    assert arm0.cut(move, bound).reasons[-1] == PARTNER_STALE
    clock.t -= 0.2  # a stamp from the future: not this host's clock
    assert arm0.cut(move, bound).reasons[-1] == PARTNER_STALE
    clock.t += 0.1  # age 0.02 s: fresh again, the arm resumes
    assert arm0.cut(move, bound).reasons == (CLIP,)
    assert arm0.counts[PARTNER_STALE] == 4


def test_the_partner_grows_with_its_age_and_its_home_is_kept_out() -> None:
    board, clock = Board(), Clock()
    home = (1.5, 0.0, 0.0)  # arm 1's home in the cell frame
    arm0, _, _ = make_arm(0, board, clock, [0.0, 0.0, 0.0], partner_home_m=home, home_keepout_m=0.02)
    arm1, _, _ = make_arm(1, board, clock, [1.0, 0.0, 0.0])  # cell (1, 0, 0)
    arm1.sent(np.zeros(4))
    report = board.reports[1]
    step = 0.05 * 1.0 * (1 + COUPLING_SHARE * math.sqrt(3))  # scale x gain bound x max action, widened
    assert report.step_m == pytest.approx(step)
    for age, n in ((0.0, 1), (0.039, 1), (0.04, 2), (0.1, 3)):
        partner, home_box = arm0.obstacles(report, age)
        assert partner[0][0] == pytest.approx(1.0 - n * step)
    assert home_box[0] == pytest.approx((1.48, -0.02, -0.02)) and home_box[1] == pytest.approx((1.52, 0.02, 0.02))
    # arm 1 sees arm 0's home (given in the cell frame) in its own frame: mirrored through (1, 0)
    arm1b, _, _ = make_arm(1, Board(), clock, [1.0, 0.0, 0.0], partner_home_m=(0.0, 0.0, 0.0), home_keepout_m=0.0)
    assert arm1b._home == ((2.0, 0.0, 0.0), (2.0, 0.0, 0.0))


class CountingLink(BoardLink):
    def __init__(self, arm: int, board: Board) -> None:
        super().__init__(arm, board)
        self.polls = 0

    def poll(self) -> PositionReport | None:
        self.polls += 1
        return super().poll()


def test_the_policy_reads_the_partner_the_loop_polled_and_never_the_link() -> None:
    # the policy runs on its worker thread: partner_position reads what the loop's thread last polled, so the link
    # (a socket) has one reader
    board, clock = Board(), Clock()
    config = SeparationConfig(0, LAYOUT, min_separation_m=MIN_SEP)
    link = CountingLink(0, board)
    arm0 = SeparationBarrier(config, link, clock)
    arm0.attach(LIMITS, PERIOD, (0, 3), Intake([0.0, 0.0, 0.0]), Line())
    arm1, intake1, _ = make_arm(1, board, clock, [1.2, 0.1, 0.0])  # cell (0.8, -0.1, 0)
    arm1.sent(np.zeros(4))
    assert arm0.partner_position() is None and link.polls == 0  # not polled yet: nothing to read
    assert arm0.poll_partner().seq == 1 and link.polls == 1
    assert arm0.partner_position() == pytest.approx((0.8, -0.1, 0.0))  # arm 0's frame is the cell's
    intake1.set([1.5, 0.0, 0.0])
    arm1.sent(np.zeros(4))
    assert arm0.partner_position() == pytest.approx((0.8, -0.1, 0.0)) and link.polls == 1  # until the next poll
    arm0.cut(result([0.1, 0.0, 0.0, 0.0]), ((0.0,) * 3, (0.0,) * 3))  # the cut polls too (the freshest report)
    assert arm0.partner_position() == pytest.approx((0.5, 0.0, 0.0)) and link.polls == 2
    arm1.sent(np.zeros(4))
    arm0.cut(result([0.1, 0.0, 0.0, 0.0]), ((0.0,) * 3, (0.0,) * 3), poll=False)  # the tick polled a moment ago
    assert link.polls == 2 and arm0.poll_partner().seq == 3  # the cut left the newest report on the link


def test_a_cut_without_a_poll_plans_with_the_report_as_polled_aged_to_now() -> None:
    # the report polled before the policy call is older by the time the cut runs: it must be grown by its age then,
    # and held once that age passes stale_s, exactly as a polled one
    board, clock = Board(), Clock()
    arm0, intake0, _ = make_arm(0, board, clock, [0.0, 0.0, 0.0])
    arm1, _, _ = make_arm(1, board, clock, [1.75, 0.0, 0.0])  # cell (0.25, 0, 0): a full command is cut
    arm1.sent(np.zeros(4))
    arm0.poll_partner()
    move = result([1.0, 0.0, 0.0, 0.0])
    fresh = arm0.cut(move, intake0.bounds, poll=False)
    clock.t += 2.5 * PERIOD  # three commands' growth, not one
    aged = arm0.cut(move, intake0.bounds, poll=False)
    assert aged.action[0] < fresh.action[0]
    clock.t += arm0.config.stale_s
    assert arm0.cut(move, intake0.bounds, poll=False).reasons[-1] == PARTNER_STALE


def test_the_ablation_shares_but_never_cuts() -> None:
    board, clock = Board(), Clock()
    arm0, intake0, _ = make_arm(0, board, clock, [0.0, 0.0, 0.0], enforce=False)
    move = result([1.0, 0.0, 0.0, 0.0])
    assert arm0.cut(move, intake0.bounds) is move  # no partner at all, yet nothing is cut
    arm0.sent(np.zeros(4))
    assert board.reports[0].known and board.reports[0].low == (0.0, 0.0, 0.0)


@pytest.mark.parametrize("seed", range(6))
def test_two_barriers_keep_two_point_arms_apart(seed: int) -> None:
    """Two point arms driven straight at each other, each through its barrier: each decides at a random moment of
    every period (either may go first), from the other's newest report; each command is applied two periods later
    with a random gain up to the bound, along a straight line over the period. The true distance never falls below
    the separation (checked at 20 points of every period)."""
    rng = np.random.default_rng(seed)
    board, clock = Board(), Clock()
    start = ([0.0, 0.0, 0.0], [0.6, 0.05, 0.0])  # each in its own frame: arm 1's (0.6, 0.05) is cell (1.4, -0.05)
    arms = [make_arm(arm, board, clock, list(start[arm])) for arm in (0, 1)]
    true = [np.array(LAYOUT.point_to_cell(arm, start[arm])) for arm in (0, 1)]
    t0 = clock.t
    for barrier, _, line in arms:
        line.commands = [[0.0] * 4, [0.0] * 4]
        barrier.sent(np.zeros(4))
    closest = math.inf
    cut_seen = 0
    for period in range(60):
        for arm in rng.permutation(2):
            barrier, intake, line = arms[arm]
            clock.t = t0 + (period + rng.uniform(0.0, 0.99)) * PERIOD
            intake.set(list(LAYOUT.point_to_cell(arm, true[arm])))
            partner = np.array(LAYOUT.point_to_cell(arm, true[1 - arm]))
            toward = partner - np.array(intake.bounds[0])
            proposal = result([*(toward / max(np.abs(toward).max(), 1e-9)), 0.0])
            out = barrier.cut(proposal, intake.bounds)
            cut_seen += SEPARATION_BARRIER in out.reasons or SEPARATION_INSIDE in out.reasons
            line.commands.append(out.action.tolist())
            barrier.sent(out.action)
        gains = rng.uniform(0.2, 1.0, size=(2, 3))
        moves = []
        for arm, (_, _, line) in enumerate(arms):
            applied = np.array(line.commands.pop(0)[:3]) * 0.05 * gains[arm]
            moves.append(np.array(LAYOUT.point_to_cell(arm, applied)) - np.array(LAYOUT.point_to_cell(arm, [0, 0, 0])))
        for s in np.linspace(0.0, 1.0, 20):
            closest = min(closest, float(np.linalg.norm(true[0] + s * moves[0] - true[1] - s * moves[1])))
        true = [true[0] + moves[0], true[1] + moves[1]]
    assert closest >= MIN_SEP
    assert cut_seen > 0
    assert closest < MIN_SEP + 0.1  # they did come close: the barrier, not distance, kept them apart


def test_starting_together_an_arm_homes_only_once_its_partner_has_ended_as_many_episodes() -> None:
    board, clock = Board(), Clock()
    done0, done1 = Episodes(), Episodes()
    arm0, _, _ = make_arm(0, board, clock, [0.0, 0.0, 0.0], done0, start_together=True)
    arm1, _, _ = make_arm(1, board, clock, [1.0, 0.0, 0.0], done1, start_together=True)
    assert not arm0.may_home()  # no partner report yet: stale
    arm1.sent(np.zeros(4))
    assert board.reports[1].episodes_ended == 0 and arm0.may_home()  # both about to begin episode 0
    done0.ended = 1  # arm 0 ended its episode 0; arm 1 is still in it
    arm1.sent(np.zeros(4))
    assert not arm0.may_home() and arm0.counts[HOME_WAITS] == 1
    done1.ended = 1
    clock.t += 0.04
    arm1.sent(np.zeros(4))
    arm0.sent(np.zeros(4))
    assert arm0.may_home() and arm1.may_home()  # both ended 1: both begin episode 1
    done1.ended = 3  # a partner ahead holds nobody back
    arm1.sent(np.zeros(4))
    assert arm0.may_home()
    with pytest.raises(ValueError, match="start_together waits on this arm's episodes"):
        make_arm(0, Board(), clock, [0.0, 0.0, 0.0], None, start_together=True)
    plain, _, _ = make_arm(0, board, clock, [0.0, 0.0, 0.0])
    done1.ended = 0
    arm1.sent(np.zeros(4))
    assert plain.may_home()  # without start_together a fresh report is enough
