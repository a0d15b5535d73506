"""The separation barrier of an arm in a two-arm cell: no command that could bring the grippers too close.

numpy-free arithmetic, robot side; a part of the command path (``CommandPath``), run after the safety filter on every
RUN and RETRACT command, and the publisher of this arm's position report (``deploy.cell.report``) after every command
sent.

Reach. Where an arm can be from now on, if it sent no further command: its position bound (``StateIntake``: it holds
the true gripper under the spec's gain range and noise) grown by the hull of the partial sums of its commands in
flight at the gain the safety filter plans with (the spec's upper bound x ``barrier_gain_margin``), widened per axis
by ``COUPLING_SHARE`` of the farthest partial sum (as the position bound reckons). Each runtime sends its reach after
every command (the command included), stamped on the host's monotonic clock.

The partner. Its newest report, ``age`` seconds old, grown on every axis by ``step_m`` (what one of its commands can
add to its reach) for each command it can have sent since: ``floor(age / period) + 1`` (one command per control
period; the one it may be deciding now included). The link is read as each tick's window opens (the partner's report
of its last command is waiting by then: decoded off the state-to-command path) and again just before the policy is
asked; the cut plans with that report and takes its age when it plans, so a report a moment older only grows more.
Also always the partner's home, a keep-out box of half-width ``home_keepout_m`` about it: a HOME moves the partner
there whatever this arm does (the simulated cell teleports, a real arm's homing path is its own), so no arm ever
plans into the other's home.

The cut. With ``R(a)`` this arm's reach once command ``a`` is in flight, ``d_j`` the distance (box to box,
Euclidean, metres) from ``R(0)`` to obstacle ``j`` and ``floor = min_separation_m + reserve_m``: a command that
*approaches* obstacle ``j`` (moves the reach toward it along an axis on which the two are apart) must keep
``dist(R(a), j) >= target_j = floor + (1 - approach_fraction) x (d_j - floor)``, and may do so only while
``d_j >= floor``; a command that does not approach ``j`` must keep ``dist(R(a), j) >= min_separation_m``. So an arm
closes at most ``approach_fraction`` of the spare distance per step and stops short of ``floor``, never plans inside
``min_separation_m``, and the reserve between the two is left for moves that approach nothing: every move widens the
reach on every axis by its coupling (``COUPLING_SHARE`` of its length), and the reach's near face only recedes once
the arm has moved, so without the reserve two arms that had closed to the separation could never part again (the
retract after an episode stalled short of home in 83 of 200 simulated goal pairs; ``deploy.runtime.retract``).
Components that approach an obstacle already inside the reserve are dropped; if what is left fails, its
approaching components are scaled down to a share that passes (the rest kept), or, when the rest alone fails, the
rest is scaled and the approach dropped. The share is found by a root finder that keeps the bracket (``cut_share`` in
``deploy.runtime.separation_cut``, with the geometry: regula falsi with the Illinois step, a halving whenever a step
does not halve the bracket; the share kept has always passed); it ends within ``CUT_CLEARANCE_TOL_M`` of the target's
clearance or ``CUT_SHARE_TOL`` of the command, after at most ``CUT_ITERATIONS`` clearance evaluations (bisection took
10 every time; this takes 2-3 at the median over random reaches and obstacles, the cut's cost in the cell 90 -> 67 us
at p50). The reserve is ``RETREAT_RESERVE_COMMANDS`` commands' coupling: ``COUPLING_SHARE x step_m`` (8.6 mm on the
simulated Fetch). A reach already closer than ``min_separation_m`` (``separation_inside``: after a stale spell, the
ablation) lets only components that move away from the obstacles' centres through (the reach's coupling allowance may
still grow toward them by a tenth of such a move; the true gap opens, and the next state's bound shows it).

Why both arms together stay apart: a report made at ``t_r`` holds the partner from ``t_r`` on, plus one ``step_m``
per command it sends after ``t_r``. Of two decisions, the later one (at ``t``) used the other arm's report of
``t_r <= t``, grown by every command the other can have sent in ``(t_r, t]``; the earlier one's reach holds its arm
until its next decision. So at any time the arm that decided last has kept the two reaches apart.

Stale partner. No report, a report older than ``stale_s`` (the supervisor or the partner is gone or stuck), one
stamped ahead of this host's clock, or one whose sender does not know where its arm is -> hold (``partner_stale``),
and no HOME goes out either (the loop waits in HOLD: ``may_home``). The arm resumes on the first fresh report. Every
cut is a reason in the tick's interventions.

Starting together (``start_together``). A cell policy is trained on episodes both arms begin at once; arms that home
on their own drift apart in phase (an aborted episode ends one arm's early), and each then meets a partner where
training never put it. With ``start_together`` an arm homes for its episode n only once its partner's fresh report
says it has ended n episodes too (``episodes_ended``): the one that finished first holds at its last position
(``home_waits_for_partner``, counted) until the other ends its episode, then both home within a tick or two.
"""

from __future__ import annotations

import math
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np

from deploy.cell.layout import ARMS, CellLayout
from deploy.cell.report import PositionReport
from deploy.runtime.position_bound import COUPLING_SHARE
from deploy.runtime.safety import FilterResult, SafetyLimits
from deploy.runtime.separation_cut import SEPARATION_BARRIER, SEPARATION_INSIDE, Box, Reach, separation_cut

PARTNER_STALE = "partner_stale"  # the partner's report is missing, stale, unknown or from another clock: hold
SEPARATION_NO_BOUND = "separation_no_bound"  # this arm's own bound is unknown: hold
HOME_DEFERRED = "home_deferred_partner_stale"  # count: a HOME waited in HOLD for a fresh partner report
HOME_WAITS = "home_waits_for_partner"  # count: a HOME waited in HOLD for the partner to end its episode too
SEPARATION_REASONS = (PARTNER_STALE, SEPARATION_BARRIER, SEPARATION_INSIDE, SEPARATION_NO_BOUND)
FUTURE_STAMP_S = 0.002  # a partner stamp this far ahead of this host's clock is from another clock (seconds)
DEFAULT_MIN_SEPARATION_M = 0.10  # the cell's rule: gripper centres at least this far apart (metres)
DEFAULT_STALE_S = 0.12  # three control periods at 25 Hz (seconds)
DEFAULT_APPROACH_FRACTION = 0.5
DEFAULT_HOME_KEEPOUT_M = 0.03  # half-width of the box about the partner's home (metres)
RETREAT_RESERVE_COMMANDS = 1.0  # the reserve an approach leaves: the coupling of this many full commands (see cut)


class ArmState(Protocol):
    """What the barrier reads of the state intake (``StateIntake``): the bound and the newest accepted state."""

    @property
    def bounds(self) -> tuple[tuple[float, ...], tuple[float, ...]] | None: ...

    @property
    def anchor(self) -> Any: ...


class EpisodeCount(Protocol):
    """What the barrier reads of the episodes (``EpisodeTracker``): how many this arm has ended."""

    @property
    def ended(self) -> int: ...


class InFlight(Protocol):
    """What the barrier reads of the command line (``CommandLine``)."""

    def in_flight_moves(self) -> list[list[float]]: ...


class ReportLink(Protocol):
    """What the barrier needs of its link to the supervisor (``deploy.cell.partner_link.PartnerLink``)."""

    def send(self, report: PositionReport) -> None: ...

    def poll(self) -> PositionReport | None: ...


@dataclass(frozen=True)
class SeparationConfig:
    """The cell's separation rule as one arm's runtime applies it. Units: metres, seconds.

    :param arm: this runtime's arm (0 or 1).
    :param layout: the cell's frames (the reports are in the cell frame; this runtime works in its arm's).
    :param min_separation_m: the smallest distance the reaches may come to (gripper centre to centre).
    :param stale_s: the partner's report older than this -> hold.
    :param approach_fraction: share of the spare distance the reach may close per command, in (0, 1].
    :param partner_home_m: the partner's home (cell frame); None: no keep-out (its homing must then be safe by
        other means).
    :param home_keepout_m: half-width of the keep-out box about the partner's home.
    :param enforce: cut commands (True); False only shares this arm's reports and reads the partner's, never cutting:
        the ablation that shows what the barrier buys.
    :param start_together: home for an episode only once the partner has ended as many (module docstring).
    """

    arm: int
    layout: CellLayout
    min_separation_m: float = DEFAULT_MIN_SEPARATION_M
    stale_s: float = DEFAULT_STALE_S
    approach_fraction: float = DEFAULT_APPROACH_FRACTION
    partner_home_m: tuple[float, float, float] | None = None
    home_keepout_m: float = DEFAULT_HOME_KEEPOUT_M
    enforce: bool = True
    start_together: bool = False

    def __post_init__(self) -> None:
        if self.arm not in ARMS:
            raise ValueError(f"arm must be one of {ARMS}, got {self.arm!r}")
        for name in ("min_separation_m", "stale_s"):
            value = getattr(self, name)
            if not (math.isfinite(value) and value > 0):
                raise ValueError(f"{name} must be a finite number > 0, got {value}")
        if not 0.0 < self.approach_fraction <= 1.0:
            raise ValueError(f"approach_fraction must be in (0, 1], got {self.approach_fraction}")
        if not (math.isfinite(self.home_keepout_m) and self.home_keepout_m >= 0):
            raise ValueError(f"home_keepout_m must be a finite number >= 0 metres, got {self.home_keepout_m}")
        if self.partner_home_m is not None:
            home = tuple(float(v) for v in self.partner_home_m)
            if len(home) != 3 or not all(map(math.isfinite, home)):
                raise ValueError(f"partner_home_m must be three finite numbers (metres), got {self.partner_home_m}")
            object.__setattr__(self, "partner_home_m", home)


# The part ----------------------------------------------------------------------------------------------------------
class SeparationBarrier:
    """One arm's separation barrier and report publisher (module docstring). Owns its report numbering, the partner's
    newest report (through ``link``) and its counts.

    :param config: the separation rule.
    :param link: the supervisor link (``PartnerLink``).
    :param clock: the host's monotonic clock (seconds), the one the reports are stamped on.
    """

    def __init__(self, config: SeparationConfig, link: ReportLink, clock: Callable[[], float] = time.monotonic) -> None:
        self.config = config
        self.link = link
        self._clock = clock
        self.counts: Counter[str] = Counter()
        self._seq = 0
        self._limits: SafetyLimits | None = None
        self._intake: ArmState | None = None
        self._line: InFlight | None = None
        self._episodes: EpisodeCount | None = None
        self._home: Box | None = None
        self._newest: PositionReport | None = None  # the partner's newest report, as last polled
        if config.partner_home_m is not None:
            k = config.home_keepout_m
            home = config.layout.point_to_cell(config.arm, config.partner_home_m)  # the map is its own inverse
            self._home = (tuple(h - k for h in home), tuple(h + k for h in home))

    def attach(
        self,
        limits: SafetyLimits,
        period_s: float,
        position_slice: tuple[int, int],
        intake: ArmState,
        line: InFlight,
        episodes: EpisodeCount | None = None,
    ) -> None:
        """Connect to the controller's parts: the filter's limits, the control period (seconds), where the gripper
        position sits in a state, the state intake (this arm's bound and newest accepted state), the command line
        (the commands in flight) and the episodes (how many ended: reported, and what ``start_together`` waits on;
        None: 0, for a barrier that serves no episodes)."""
        if self.config.start_together and episodes is None:
            raise ValueError("start_together waits on this arm's episodes: attach them (the controller's tracker)")
        self._limits = limits
        self._period_s = float(period_s)
        self._where = slice(*position_slice)
        self._intake, self._line, self._episodes = intake, line, episodes
        dims = limits.position_dims
        self._dims = dims
        # at the gain the safety filter plans with (the spec's bound times its barrier_gain_margin: a faster motor)
        self.move_per_unit_m = limits.action_scale_m * limits.actuator_gain_max * limits.barrier_gain_margin
        self.step_m = self.move_per_unit_m * limits.max_action * (1.0 + COUPLING_SHARE * math.sqrt(dims))
        # the band above min_separation_m an approach leaves for moves away, whose coupling widens the reach toward
        # the partner: without it two arms parked at the separation could never part (each move away shrank it)
        self.reserve_m = RETREAT_RESERVE_COMMANDS * COUPLING_SHARE * self.step_m

    @property
    def attached(self) -> bool:
        return self._limits is not None

    def summary(self) -> dict[str, Any]:
        """What a run reports of the barrier: its counts by reason (plain types, picklable)."""
        return {"barrier_counts": dict(self.counts)}

    # The partner ---------------------------------------------------------------------------------------------
    def poll_partner(self) -> PositionReport | None:
        """Read the link (the loop's thread only: the one reader of the socket) and keep the partner's newest
        report, which ``partner_position`` hands the policy; None before the first."""
        self._newest = self.link.poll()
        return self._newest

    def partner(self, poll: bool = True) -> tuple[PositionReport | None, float]:
        """The partner's newest report if it can be planned with, and its age now (seconds; inf when there is none).
        ``poll``: read the link first (False: as last polled; an older report's age only grows the partner more)."""
        report = self.poll_partner() if poll else self._newest
        if report is None:
            return None, math.inf
        age = report.age_s(self._clock())
        if not report.known or age > self.config.stale_s or age < -FUTURE_STAMP_S:
            return None, age
        return report, age

    def partner_position(self) -> tuple[float, ...] | None:
        """The partner's newest checked gripper position in this arm's frame (metres), however old; None before the
        first report. What a cell policy reads as the partner (the barrier, not the policy, judges its age). Reads
        the report the loop's thread last polled (``poll_partner``: ``CommandPath.propose`` polls just before it asks
        the policy), never the link: the policy runs on its worker thread, and the link has one reader."""
        report = self._newest
        if report is None or not report.known:
            return None
        return self.config.layout.point_to_cell(self.config.arm, report.position)

    def obstacles(self, report: PositionReport, age_s: float) -> list[Box]:
        """The partner's reach grown by the commands it can have sent since its report, and its home (arm frame)."""
        n = math.floor(max(age_s, 0.0) / report.period_s) + 1
        grow = n * report.step_m
        low, high = self.config.layout.box_to_cell(self.config.arm, report.low, report.high)
        boxes: list[Box] = [([v - grow for v in low], [v + grow for v in high])]
        if self._home is not None:
            boxes.append(self._home)
        return boxes

    def may_home(self) -> bool:
        """Whether this arm may home now: the partner's report is fresh (or the barrier is off, the ablation) and,
        with ``start_together``, says the partner has ended as many episodes as this arm."""
        report = self.partner()[0]
        if self.config.enforce and report is None:
            self.counts[HOME_DEFERRED] += 1
            return False
        if self.config.start_together and (report is None or report.episodes_ended < self.episodes_ended):
            self.counts[HOME_WAITS] += 1
            return False
        return True

    @property
    def episodes_ended(self) -> int:  # this arm's (0 for a barrier that serves no episodes)
        return 0 if self._episodes is None else self._episodes.ended

    # The cut -------------------------------------------------------------------------------------------------
    def cut(self, result: FilterResult, bound: Any, poll: bool = True) -> FilterResult:
        """The filter's ``result`` for one RUN command, cut by the separation rule (``bound``: this arm's position
        bound, low and high, metres, or None). ``poll``: read the link first (False: as last polled, ``propose``)."""
        if result.stop or not self.config.enforce:
            return result
        dims = self._dims
        action = result.action
        report, age = self.partner(poll)
        if report is None:
            self.counts[PARTNER_STALE] += 1
            return FilterResult(np.zeros_like(action), (*result.reasons, PARTNER_STALE), False)
        if bound is None:
            self.counts[SEPARATION_NO_BOUND] += 1
            return FilterResult(np.zeros_like(action), (*result.reasons, SEPARATION_NO_BOUND), False)
        scale = self.move_per_unit_m
        reach = Reach(bound[0], bound[1], self._moves_in_flight_m(), COUPLING_SHARE)
        proposed = action[:dims].tolist()
        cut, reason = separation_cut(
            reach,
            proposed,
            scale,
            self.obstacles(report, age),
            self.config.min_separation_m,
            self.config.approach_fraction,
            self.reserve_m,
        )
        if not reason:
            return result
        self.counts[reason] += 1
        out = action.copy()
        out[:dims] = cut
        return FilterResult(out, (*result.reasons, reason), False)

    # Publishing ----------------------------------------------------------------------------------------------
    def sent(self, command: np.ndarray) -> None:
        """A command went out (any mode): send this arm's reach, that command included, to the supervisor."""
        if self._limits is None:
            return
        self._seq += 1
        intake = self._intake
        bounds, anchor = intake.bounds, intake.anchor  # type: ignore[union-attr]
        layout, arm = self.config.layout, self.config.arm
        period = self._period_s
        if bounds is None or anchor is None:
            zero = (0.0, 0.0, 0.0)
            report = PositionReport(
                arm, self._seq, self._clock(), False, zero, zero, zero, self.step_m, period, self.episodes_ended
            )
        else:
            low, high = Reach(bounds[0], bounds[1], self._moves_in_flight_m(), COUPLING_SHARE).box()
            low, high = layout.box_to_cell(arm, low, high)
            where = layout.point_to_cell(arm, anchor.state[self._where].tolist())
            report = PositionReport(
                arm, self._seq, self._clock(), True, low, high, where, self.step_m, period, self.episodes_ended
            )
        self.link.send(report)
        self.counts["reports_sent"] += 1

    def _moves_in_flight_m(self) -> list[list[float]]:
        """The commands in flight as moves (metres per axis, at the gain the filter plans with), oldest first."""
        scale = self.move_per_unit_m
        return [[u * scale for u in move] for move in self._line.in_flight_moves()]  # type: ignore[union-attr]
