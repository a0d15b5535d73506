"""The separation barrier's geometry and its cut: reaches as boxes, their distances, and the cut of one command to a
share that keeps the distance (``deploy.runtime.separation`` says what the reach and the obstacles are and why two
barriers keep two arms apart).

numpy-free arithmetic, robot side; runs on every RUN command of a cell arm, so its inner loop (``Reach.clearance``)
builds nothing.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

SEPARATION_BARRIER = "separation_barrier"  # the command was cut to keep the reaches apart
SEPARATION_INSIDE = "separation_inside"  # the reaches were already too close: only motion away passes
# the cut's root finder (cut_share) stops once the kept share's clearance is within CUT_CLEARANCE_TOL_M of the target,
# or the bracket is narrower than CUT_SHARE_TOL of the command (under 0.2 mm of a full command at the planning gain), or
# after CUT_ITERATIONS clearance evaluations (the share kept always passes, so stopping early only cuts a hair more)
CUT_CLEARANCE_TOL_M = 1e-4
CUT_SHARE_TOL = 2.0**-10
CUT_ITERATIONS = 10

Box = tuple[Sequence[float], Sequence[float]]


def box_distance(a_low: Sequence[float], a_high: Sequence[float], b_low: Sequence[float], b_high: Sequence[float]):
    """Euclidean distance between two axis-aligned boxes (0 when they touch or overlap), metres."""
    total = 0.0
    for al, ah, bl, bh in zip(a_low, a_high, b_low, b_high, strict=True):
        gap = max(bl - ah, al - bh, 0.0)
        total += gap * gap
    return math.sqrt(total)


class Reach:
    """An arm's reach from its bound and the moves in flight (metres, at the gain upper bound), to which one more
    move can be added cheaply (the cut tries many).

    :param low: the position bound's low corner (metres).
    :param high: its high corner.
    :param moves: the moves in flight, oldest first (metres per axis, already at the gain upper bound).
    :param coupling_share: per-axis widening as a share of the farthest partial sum.
    """

    def __init__(
        self, low: Sequence[float], high: Sequence[float], moves: Sequence[Sequence[float]], coupling_share: float
    ) -> None:
        self.low, self.high, self.coupling = list(low), list(high), coupling_share
        dims = len(self.low)
        total, lo, hi, far = [0.0] * dims, [0.0] * dims, [0.0] * dims, 0.0
        for move in moves:
            total = [t + m for t, m in zip(total, move, strict=True)]
            lo = [min(a, t) for a, t in zip(lo, total, strict=True)]
            hi = [max(a, t) for a, t in zip(hi, total, strict=True)]
            far = max(far, math.hypot(*total))
        self._total, self._lo, self._hi, self._far = total, lo, hi, far

    def box(self, move: Sequence[float] | None = None) -> tuple[list[float], list[float]]:
        """The reach with ``move`` (metres) added after the moves in flight (None: as it is)."""
        lo, hi, far = self._lo, self._hi, self._far
        if move is not None:
            total = [t + m for t, m in zip(self._total, move, strict=True)]
            lo = [min(a, t) for a, t in zip(lo, total, strict=True)]
            hi = [max(a, t) for a, t in zip(hi, total, strict=True)]
            far = max(far, math.hypot(*total))
        c = self.coupling * far
        return (
            [b + r - c for b, r in zip(self.low, lo, strict=True)],
            [b + r + c for b, r in zip(self.high, hi, strict=True)],
        )

    def spare(self, move: Sequence[float], obstacles: Sequence[Box], required: Sequence[float]) -> float:
        """The least, over ``obstacles``, of the distance from ``self.box(move)`` to obstacle ``j`` less
        ``required[j]`` (metres; with zeros, the distance to the nearest), without building the box: the cut's inner
        loop, written for speed (it runs a few times in every cut tick)."""
        total = [t + m for t, m in zip(self._total, move, strict=True)]
        c = self.coupling * max(self._far, math.hypot(*total))
        low = [b + (r if r < t else t) - c for b, r, t in zip(self.low, self._lo, total, strict=True)]
        high = [b + (r if r > t else t) + c for b, r, t in zip(self.high, self._hi, total, strict=True)]
        worst = math.inf
        for (o_low, o_high), need in zip(obstacles, required, strict=True):
            sq = 0.0
            for ol, oh, lo, hi in zip(o_low, o_high, low, high, strict=True):
                gap = ol - hi
                if gap <= 0.0:
                    gap = lo - oh
                    if gap <= 0.0:
                        continue
                sq += gap * gap
            spare = math.sqrt(sq) - need
            if spare < worst:
                worst = spare
        return worst


def nearest(box: tuple[Sequence[float], Sequence[float]], obstacles: Sequence[Box]) -> float:
    """Distance (metres) from ``box`` to the nearest of ``obstacles`` (inf when there are none)."""
    return min((box_distance(box[0], box[1], o[0], o[1]) for o in obstacles), default=math.inf)


def separation_cut(
    reach: Reach,
    proposed: Sequence[float],
    move_per_unit_m: float,
    obstacles: Sequence[Box],
    min_separation_m: float,
    approach_fraction: float = 1.0,
    reserve_m: float = 0.0,
) -> tuple[list[float], str]:
    """Cut the Cartesian command ``proposed`` (command units) so that the reach keeps its distance (the rule: the
    ``deploy.runtime.separation`` docstring, "The cut").

    :param reach: this arm's reach before the command.
    :param move_per_unit_m: metres one command unit moves the arm at the gain upper bound.
    :param obstacles: boxes (low, high; metres, this arm's frame) to keep ``min_separation_m`` from.
    :param reserve_m: the band above ``min_separation_m`` an approach leaves free (metres): a command may spend it
        on an obstacle it does not approach (its coupling widens the reach toward it), never on one it approaches.
    :returns: the command to send (command units) and the reason ("" when it passed unchanged).
    """
    command = [float(v) for v in proposed]
    low0, high0 = reach.box()
    dists, sides = [], []  # per obstacle: its distance, and the sign of a move that approaches it along each axis
    for o_low, o_high in obstacles:
        sq, side = 0.0, []
        for lo, hi, ol, oh in zip(low0, high0, o_low, o_high, strict=True):
            if hi < ol:
                sq += (ol - hi) ** 2
                side.append(1)
            elif lo > oh:
                sq += (lo - oh) ** 2
                side.append(-1)
            else:
                side.append(0)  # the two overlap on this axis
        dists.append(math.sqrt(sq))
        sides.append(side)
    d0 = min(dists, default=math.inf)
    if not command or not any(command) or not math.isfinite(d0):
        return command, ""
    if d0 < min_separation_m:
        cut = list(command)
        centre = [(a + b) / 2 for a, b in zip(low0, high0, strict=True)]
        for (o_low, o_high), d in zip(obstacles, dists, strict=True):
            if d >= min_separation_m:
                continue
            for k, (c, ol, oh) in enumerate(zip(centre, o_low, o_high, strict=True)):
                if cut[k] * (c - (ol + oh) / 2) < 0:
                    cut[k] = 0.0
        return cut, (SEPARATION_INSIDE if cut != command else "")
    floor = min_separation_m + reserve_m  # an approach stops here; the reserve below it is for other moves
    allowed = command
    targets = []  # per obstacle: the clearance a command approaching it keeps (None: it is in the reserve; no approach)
    for side, d in zip(sides, dists, strict=True):
        if d >= floor:
            targets.append(floor + (1.0 - approach_fraction) * (d - floor))
            continue
        targets.append(None)
        # components that approach an obstacle already in the reserve are dropped
        allowed = [0.0 if u * s > 0 else u for u, s in zip(allowed, side, strict=True)]
    need = [  # per obstacle, the clearance any share > 0 of ``allowed`` (or of its approach) must keep
        target
        if target is not None and any(u * s > 0 for u, s in zip(allowed, side, strict=True))
        else min_separation_m
        for target, side in zip(targets, sides, strict=True)
    ]

    def spare_of(candidate: list[float], need: list[float]) -> float:  # metres beyond what it must keep; >= 0 passes
        return reach.spare([u * move_per_unit_m for u in candidate], obstacles, need)

    spare_allowed = spare_of(allowed, need)
    if spare_allowed >= 0.0:
        return allowed, ("" if allowed == command else SEPARATION_BARRIER)
    toward = [any(u * side[k] > 0 for side in sides) for k, u in enumerate(allowed)]  # per axis

    def toward_scaled(share: float) -> list[float]:
        return [u * share if t else u for u, t in zip(allowed, toward, strict=True)]

    rest = toward_scaled(0.0)  # the components that approach no obstacle
    spare_none = d0 - min_separation_m  # no command: the reach as it is
    if not any(rest):  # every component approaches: scale them together
        share = cut_share(lambda s: spare_of([u * s for u in allowed], need), spare_none, spare_allowed)
        return [u * share for u in allowed], SEPARATION_BARRIER
    need_rest = [min_separation_m] * len(obstacles)  # the rest approaches nothing
    spare_rest = spare_of(rest, need_rest) if any(toward) else spare_allowed
    if any(toward) and spare_rest >= 0.0:  # the rest passes whole: scale only the approach
        share = cut_share(lambda s: spare_of(toward_scaled(s), need), spare_rest, spare_allowed)
        return toward_scaled(share), SEPARATION_BARRIER
    # no approach this step: as much of the rest as keeps the separation (its coupling may spend the reserve)
    share = cut_share(lambda s: spare_of([u * s for u in rest], need_rest), spare_none, spare_rest)
    return [u * share for u in rest], SEPARATION_BARRIER


def cut_share(spare: Callable[[float], float], spare_none: float, spare_full: float) -> float:
    """A share in [0, 1) whose ``spare`` (metres) is >= 0, at a sign change of ``spare``: regula falsi with the
    Illinois step on the bracket [passes, fails], aimed at half the clearance tolerance (a secant aimed at 0 keeps
    landing a hair on the failing side of a root where the clearance bends), and a halving after any step that did
    not halve the bracket (so it narrows at least as fast as every other bisection step). ``spare_none``: the spare
    at 0 (>= 0); ``spare_full``: at 1 (< 0). Stops within ``CUT_CLEARANCE_TOL_M`` of the target, ``CUT_SHARE_TOL``
    of the share, or after ``CUT_ITERATIONS`` evaluations; the share returned has always passed."""
    aim = CUT_CLEARANCE_TOL_M / 2
    lo, hi = 0.0, 1.0
    spare_lo = spare_none  # the kept share's spare (the stopping test)
    f_lo, f_hi = spare_none - aim, spare_full - aim  # the secant's end values (Illinois halves one on a repeat)
    side = 0  # the end the last step moved: +1 lo, -1 hi
    bisect = False
    for _ in range(CUT_ITERATIONS):
        if spare_lo <= CUT_CLEARANCE_TOL_M or hi - lo <= CUT_SHARE_TOL:
            break
        width = hi - lo
        share = (lo + hi) / 2 if bisect else (lo * f_hi - hi * f_lo) / (f_hi - f_lo)
        if not lo < share < hi:  # rounding at a bracket's end: halve instead
            share = (lo + hi) / 2
        value = spare(share)
        if value >= 0.0:
            lo, spare_lo, f_lo = share, value, value - aim
            if side == 1:
                f_hi /= 2
            side = 1
        else:
            hi, f_hi = share, value - aim
            if side == -1:
                f_lo /= 2
            side = -1
        bisect = hi - lo > width / 2
    return lo
