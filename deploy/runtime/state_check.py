"""Is a robot state plausible? Checked against the robot spec and the commands in flight before it is used.

numpy only (robot side). A CRC-valid frame can still carry a wrong state: a sensor or encoder glitch, a clock that
jumped, a controller that rebooted. The control loop hands every fresh, finite state to ``StateChecker.check``
together with the commands that may have been applied since the last accepted state; a state that fails is never
used to plan (the loop holds and counts it). The checks, against the last accepted state (the anchor):

- time: the robot's clock must move forward (``time_backwards``) and must not run ahead of the local clock by more
  than ``clock_tolerance_s`` once the clock offset is taken out (``time_ahead``). The offset is the fastest transit
  seen (local receive time minus robot stamp) over accepted states only, allowed to grow slowly
  (``OFFSET_DRIFT_S_PER_S``) so a slow robot clock does not age every state over a long run. The tolerance is at
  most half the watchdog's hold time: a state accepted that far ahead lowers the offset, and so ages later states,
  by less than the watchdog reacts to;
- sequence: at most ``seq_gap_slack`` more messages than the elapsed time and the loop's own messages explain
  (``seq_gap``: a robot numbers up to ``MSGS_PER_STEP`` messages per control step and per message it answers); an
  older sequence number (``seq_backwards``) is a replay or a reboot;
- values: every other state field within its plausibility bound (``field_out_of_range``,
  ``deploy.runtime.field_bounds``): the range the spec's ``state_bounds`` gives its field (e.g. a finger joint's
  limits), widened by the noise allowance; else a velocity at most twice what the spec's plausible speed allows in one
  control step; any other field (a length in metres) no larger than the reachable envelope's diagonal. A glitch such
  as 1e30 never reaches the policy;
- position: inside the reachable envelope (the workspace grown by ``envelope_margin_m``, ``outside_envelope``);
  no faster than ``plausible_speed_m_s`` over the elapsed time (``too_fast``); no further (Euclidean) than the
  applied commands can move the arm at the spec's gain bound, plus a share of the motion carried from the previous
  step and a margin (``unexplained_motion``: a glitch); and, summed over the last ``GAIN_WINDOW`` states, no
  further than the gain bound allows (``exceeds_gain``: the robot is faster than its spec says; recalibrate); and
  along the commands the robot's delay line shows applied, at least ``FOLLOW_FRACTION`` of what they move the arm
  at the spec's gain (``not_following``: a frozen position sensor, a blocked arm, a robot that reports commands
  applied that it did not execute). A robot that reports no line says nothing certain, so following is not judged
  here: the loop reckons it over several states from the commands sent and the spec's delay
  (``deploy.runtime.unreported_following``).
  Distances, not axes: a command on one axis moves the arm a little on the others (the arm's kinematics), so only
  the length of the motion is bounded by the length of the commands. Margins include ``NOISE_SIGMAS`` standard
  deviations of the spec's noise.

The delay line is checked by the loop before a state reaches this checker (``CommandLine.unsent``): a line naming a
command the loop never sent is implausible too (``unsent_pending``); the checker never sees that state.

Homing: after a HOME is sent the robot moves (or, simulated, jumps) to its home pose by itself, so until its HOMED
state is accepted the motion checks are off (envelope, time and sequence still apply). The HOMED state itself may be
lost on the link: the states behind it show the arm at home without the flag. Those are accepted, never planned
with (the loop only plans once the HOMED state comes; it resends HOME meanwhile), and not mistaken for glitches.
The HOMED state is the anchor the episode's first command is planned from, and nothing before it bounds where the arm
is; where the spec has a home pose (``home.position_m``, measured by the calibration probe), a HOMED state further
from it than ``home.tolerance_m`` plus the noise allowance is a glitch (``homed_off_home``): never an anchor, and the
loop waits for the next HOMED state (resending HOME) as if it had been lost. A HOMED state at the spec's home when
no HOME is awaited (a resent HOME answered twice, or a robot that homed by itself) is accepted without the motion
checks, since the arm went home by itself; the loop decides what it means (``loop_resets``).

Recovery: rejected states form a candidate chain. When ``resync_states`` of them in a row are consistent with each
other but the break with the anchor is in time or sequence (the robot restarted: its clock and counter began
again, or one bad stamp shifted them), the checker re-anchors on the chain and reports ``restart``: the loop holds
and re-homes. A chain that is only "ahead" of the clock offset, and otherwise continues the anchor (sequence,
motion), shows the offset was overestimated (the first states after a reset arrived late); the offset is corrected
and the state accepted (``clock_corrected``), with no re-home. A break in position alone (a persistent offset, an
arm pushed by hand) is never re-anchored here: the loop safe-stops after enough implausible states, and a fresh
anchor is taken after the robot is re-homed.

Fast path: positions are three numbers, so the checks run on Python floats (one ``tolist()`` per state) rather than
on tiny numpy arrays, like the safety filter; ``benchmarks/safety_filter.py`` measures a check.

For the barrier, an accepted state comes with bounds on where the gripper really is: per axis, the measured
position and the furthest the anchor plus the applied commands can have gone, whichever is nearer each face, widened
by the noise. A glitch small enough to pass the checks therefore cannot make the barrier plan from a position
further from a face than the commands allow.
"""

from __future__ import annotations

import math
import operator
from collections import deque
from collections.abc import Sequence
from typing import NamedTuple

from deploy.contract import ObservationContract
from deploy.robot_spec import RobotSpec
from deploy.runtime.field_bounds import FieldBounds
from deploy.runtime.state_stamps import (
    SEQ_BACKWARDS,
    SEQ_GAP,
    TIME_AHEAD,
    TIME_BACKWARDS,
    RestartChain,
    Seen,
    StampCheck,
)
from deploy.wire import StateMsg, seq_newer

# Kinds of implausible state (the tick log records ``implausible_<kind>``).
OUTSIDE_ENVELOPE = "outside_envelope"
TOO_FAST = "too_fast"
UNEXPLAINED_MOTION = "unexplained_motion"
EXCEEDS_GAIN = "exceeds_gain"
FIELD_OUT_OF_RANGE = "field_out_of_range"
HOMED_OFF_HOME = "homed_off_home"  # a HOMED state away from the spec's home pose
NOT_FOLLOWING = "not_following"  # the arm did not move along the commands it certainly applied (frozen, blocked)
# The delay line names a command the loop never sent (checked by the loop before this checker: CommandLine.unsent)
UNSENT_PENDING = "unsent_pending"
# ... or lists its commands in another order than they were sent (line_order.out_of_order): a serial link does not
# reorder frames, so the robot's bookkeeping of its line is wrong, and so would be the policy's action history
PENDING_ORDER = "pending_order"
# ... or cannot follow from the previous accepted line on a robot that applies its line oldest first
# (line_order.not_fifo): a command already applied listed again, or one gone from the middle
PENDING_NOT_FIFO = "pending_not_fifo"
IMPLAUSIBLE_KINDS = (
    TIME_BACKWARDS,
    TIME_AHEAD,
    SEQ_GAP,
    SEQ_BACKWARDS,
    OUTSIDE_ENVELOPE,
    TOO_FAST,
    UNEXPLAINED_MOTION,
    EXCEEDS_GAIN,
    FIELD_OUT_OF_RANGE,
    HOMED_OFF_HOME,
    NOT_FOLLOWING,
    UNSENT_PENDING,
    PENDING_ORDER,
    PENDING_NOT_FIFO,
)
# values no robot can report, and a home pose no homing ends in: no re-anchoring on them
NEVER_ANCHOR_KINDS = frozenset({OUTSIDE_ENVELOPE, FIELD_OUT_OF_RANGE, HOMED_OFF_HOME})

NOISE_SIGMAS = 4.0  # noise allowance of every position check, in standard deviations of the spec's noise
BOUND_NOISE_SIGMAS = 3.0  # the barrier's position bounds are widened by this many standard deviations
MOTION_MARGIN_M = 0.01  # metres of motion no command explains that are still normal (sag, contact, coupling)
CARRY_FRACTION = 0.5  # share of the previous step's motion the arm may carry into the next (momentum)
# The arm must move along the commands it certainly applied (CommandLine.applied_for_sure) by at least this share of
# their net move at the spec's nominal gain, less half the previous step's motion against them (CARRY_FRACTION), half
# their path beyond the net move (REVERSAL_SLACK: the arm lags each reversal) and the noise. FetchReach inside the
# workspace box (300 episodes of random, bang-bang, on/off and every-step-reversing commands; 45,000 windows of 1 to
# 4 steps with at least 1 cm of net command) never moved less than 0.036 of it: 3.6x headroom. A frozen position
# sensor moves 0 (before this check the arm drove blind, 0.38 m out of the box, on a sensor frozen mid-episode).
FOLLOW_FRACTION = 0.01
REVERSAL_SLACK = 0.5
MIN_FOLLOW_M = 0.01  # metres of expected net motion below which following is not judged
GAIN_WINDOW = 6  # states over which the summed motion must fit the gain bound (a margin per step would hide it)
SPEED_MARGIN_M = 0.001  # metres added to the speed bound (rounding of short intervals)
OFFSET_DRIFT_S_PER_S = 1e-3  # the clock offset may grow this fast: robot clocks slower than ours by <= 1000 ppm
DEFAULT_CLOCK_TOLERANCE_S = 0.05
DEFAULT_SEQ_GAP_SLACK = 32  # messages still in flight when the anchor was taken, answered after it
DEFAULT_RESYNC_STATES = 3


def net_move(expected: list[list[float]]) -> tuple[list[float], float, float]:
    """Of the moves commands should make (metres per axis, one row each): the net move, its length and the path
    (their summed lengths), metres."""
    net = [sum(axis) for axis in zip(*expected, strict=True)]
    return net, math.hypot(*net), sum(math.hypot(*e) for e in expected)


def falls_short(motion: list[float], net: list[float], length: float, path: float, slack_m: float) -> bool:
    """Whether ``motion`` (metres) went less far along the commands' ``net`` move (of ``length`` > 0 and ``path``,
    from ``net_move``) than ``FOLLOW_FRACTION`` of it, allowing ``REVERSAL_SLACK`` of the path beyond the net move
    (the arm lags each reversal) and ``slack_m`` more (carried motion, noise): the arm did not follow them."""
    along = sum(m * e for m, e in zip(motion, net, strict=True)) / length
    return along < FOLLOW_FRACTION * length - REVERSAL_SLACK * (path - length) - slack_m


class Verdict(NamedTuple):
    """The check of one state.

    :param accepted: the state may be used to plan.
    :param kind: why it was rejected (one of ``IMPLAUSIBLE_KINDS``); "" when accepted.
    :param restart: the robot restarted: the checker re-anchored on this state; hold and re-home.
    :param clock_corrected: the clock offset was lowered to what this state and the ones before it confirm.
    :param low: lower bound of where the gripper is (metres, accepted states only).
    :param high: upper bound (metres).
    :param motion_m: the measured motion since the previous anchor (metres per axis; empty without one, or when the
        arm moved by itself: homing).
    """

    accepted: bool
    kind: str = ""
    restart: bool = False
    low: tuple[float, ...] | None = None
    high: tuple[float, ...] | None = None
    clock_corrected: bool = False
    motion_m: tuple[float, ...] = ()


def noise_check_m(spec: RobotSpec) -> list[float]:
    """Per axis, the allowance (metres) for the difference of two noisy position readings under ``spec``'s noise."""
    return [NOISE_SIGMAS * math.sqrt(2.0) * float(v) for v in spec.observation_noise_std_m]


def step_reach_m(applied_units: float, step_m_per_unit: float, previous_motion: Sequence[float]) -> float:
    """How far (metres) the arm can have moved between two states: the commands applied between them
    (``applied_units``: their summed Euclidean length, command units) at the gain bound (``step_m_per_unit``), plus
    ``CARRY_FRACTION`` of the previous step's motion (metres per axis) carried on."""
    return applied_units * step_m_per_unit + CARRY_FRACTION * math.hypot(*previous_motion)


def motion_bound(
    position: Sequence[float], previous: Sequence[float], reach_m: float, noise_m: Sequence[float]
) -> tuple[tuple[float, ...], tuple[float, ...]]:
    """An accepted state's bound (low, high; metres per axis): its ``position`` widened toward where the previous
    accepted position plus ``reach_m`` could have taken the arm (a stale reading is then still inside), and by the
    noise allowance ``noise_m``. The training envs' shields plan from the same bound (``envs.checked_bound``)."""
    sides = list(zip(position, previous, noise_m, strict=True))
    low = tuple([min(p, a - reach_m) - n for p, a, n in sides])
    high = tuple([max(p, a + reach_m) + n for p, a, n in sides])
    return low, high


class StateChecker:
    """Checks each fresh, finite state against the spec and the commands in flight (see the module docstring).

    :param spec: the robot spec (plausible speed, gain bound, noise, workspace, envelope margin, control period).
    :param contract: the policy's contract (where the position sits in the state).
    :param loop_period_s: the control loop's period (seconds): sequence gaps are judged per period.
    :param resync_states: consistent rejected states in a row that confirm a robot restart.
    :param clock_tolerance_s: how far (seconds) a stamp may run ahead of the local clock.
    :param seq_gap_slack: messages beyond the elapsed time's share a state may skip.
    """

    def __init__(
        self,
        spec: RobotSpec,
        contract: ObservationContract,
        loop_period_s: float,
        resync_states: int = DEFAULT_RESYNC_STATES,
        clock_tolerance_s: float = DEFAULT_CLOCK_TOLERANCE_S,
        seq_gap_slack: int = DEFAULT_SEQ_GAP_SLACK,
    ) -> None:
        if resync_states < 2:
            raise ValueError(f"resync_states must be >= 2 states (one state confirms nothing), got {resync_states}")
        if not loop_period_s > 0:
            raise ValueError(f"loop_period_s must be > 0 seconds, got {loop_period_s}")
        self.spec = spec
        self._pos = slice(*contract.position_slice)
        self._dims = contract.goal_dim
        tolerance_s = min(clock_tolerance_s, spec.watchdog_hold_s / 2.0)
        self.stamps = StampCheck(float(loop_period_s), spec.control_period_s, tolerance_s, seq_gap_slack)
        noise = [float(v) for v in spec.observation_noise_std_m]
        self._noise_check_m = noise_check_m(spec)  # two noisy positions a difference
        self._noise_bound_m = [BOUND_NOISE_SIGMAS * v for v in noise]
        self._motion_margin_m = MOTION_MARGIN_M + math.hypot(*self._noise_check_m)
        margin = spec.envelope_margin_m
        self._env_low = [lo - margin - NOISE_SIGMAS * v for lo, v in zip(spec.workspace_low, noise, strict=True)]
        self._env_high = [hi + margin + NOISE_SIGMAS * v for hi, v in zip(spec.workspace_high, noise, strict=True)]
        diagonal_m = math.dist(self._env_low, self._env_high)
        self._fields = FieldBounds(spec, contract, NOISE_SIGMAS * max(noise), diagonal_m)
        self._home = None if spec.home_position_m is None else [float(v) for v in spec.home_position_m]
        self.home_tolerance_m = spec.home_tolerance_m + math.hypot(*(NOISE_SIGMAS * v for v in noise))
        self.home_error_m = 0.0  # distance of the last HOMED state from the spec's home (metres; 0 before one)
        self._step_m_per_unit = spec.command_scale_m * spec.actuator_gain_max
        self._follow_m_per_unit = [spec.command_scale_m * g for g in spec.actuator_gain]  # nominal gain, per axis
        self.follow_noise_m = max(self._noise_check_m)  # a projection of the difference of two noisy positions (m)
        self._speed_m_s = spec.plausible_speed_m_s
        self._still = [0.0] * self._dims  # the motion of a state with no anchor (never mutated)
        self.anchor: Seen | None = None
        self.offset_s = math.inf  # local minus robot time of the fastest accepted transit (seconds)
        self.chain = RestartChain(resync_states, self._consistent)
        self._window: deque[Seen] = deque(maxlen=GAIN_WINDOW - 1)  # accepted states that moved, newest last
        self._home_expected = False

    # Lifecycle ---------------------------------------------------------------------------------------------
    def reset(self) -> None:
        """Forget everything (a reconnect, or a restart after a safe stop): the next state becomes the anchor."""
        self.anchor = None
        self.offset_s = math.inf
        self.chain.clear()
        self._window.clear()
        self._home_expected = False

    def expect_home(self) -> None:
        """A HOME was sent: until a state flagged HOMED is accepted, states may be anywhere in the envelope (the arm
        moves home by itself; the HOMED state may be lost)."""
        self._home_expected = True

    @property
    def home_expected(self) -> bool:
        """A HOME was sent and its HOMED state not yet accepted: the arm moves by itself (motion is not checked)."""
        return self._home_expected

    def robot_time_local(self, t_robot: float) -> float:
        """The local time (seconds) at which the robot made a state stamped ``t_robot`` (at the fastest transit)."""
        return t_robot + self.offset_s

    # The check ----------------------------------------------------------------------------------------------
    def check(
        self,
        msg: StateMsg,
        t_recv: float,
        applied_units: float,
        homed: bool = False,
        prompts: int = 0,
        applied_for_sure: list[list[float]] | None = None,
    ) -> Verdict:
        """Check one fresh, finite state received at local time ``t_recv``.

        :param applied_units: summed Euclidean length (command units, position part) of the commands that may have
            been applied since the anchor (``CommandLine.applied_length``): they bound the motion.
        :param homed: the state carries the HOMED flag.
        :param prompts: messages the loop has sent so far (a running count): each may be answered.
        :param applied_for_sure: the moves (command units, per axis) of the commands certainly applied since the
            anchor (``CommandLine.applied_for_sure``; None: unknown): the arm must follow them (``not_following``).
        """
        values = msg.state.tolist()
        position = values[self._pos]
        seen = Seen(msg.seq, msg.t_s, t_recv, position, msg.pending, self._still, prompts)
        if self._outside_envelope(position):
            return self._reject(seen, OUTSIDE_ENVELOPE)
        if self._fields.violated(values):
            return self._reject(seen, FIELD_OUT_OF_RANGE)
        if homed and self._home is not None:
            self.home_error_m = math.dist(position, self._home)
            if self.home_error_m > self.home_tolerance_m:
                return self._reject(seen, HOMED_OFF_HOME)
        anchor = self.anchor
        if anchor is None:
            return self._accept(seen, None)
        kind = self.stamps.kind(seen, anchor, self.offset_s)
        corrected = False
        if kind == TIME_AHEAD and self.chain.only_ahead(seen):
            self.offset_s = self.chain.fastest_transit_s(seen)
            kind, corrected = self.stamps.kind(seen, anchor, self.offset_s), True
        if kind:
            return self._reject(seen, kind)
        if self._home_expected or (homed and self._home is not None):
            # The robot moves home on its own: no command explains that motion, until its HOMED state arrives (that
            # one may have been lost). A HOMED state no HOME is waiting for (a resent HOME's late answer, or a robot
            # that homed by itself) is at the spec's home (checked above): the arm went there, it did not jump.
            self._home_expected = self._home_expected and not homed
            self._window.clear()
            return self._accept(seen, None, corrected)
        motion = [p - a for p, a in zip(position, anchor.position, strict=True)]
        if self._too_fast(motion, self.stamps.elapsed_s(seen, anchor)):
            return self._reject(seen, TOO_FAST)
        seen.reach = applied_units * self._step_m_per_unit
        reach = step_reach_m(applied_units, self._step_m_per_unit, anchor.motion)
        if math.hypot(*motion) > reach + self._motion_margin_m:
            return self._reject(seen, UNEXPLAINED_MOTION)
        seen.motion = motion
        if applied_for_sure is not None and self._not_following(motion, applied_for_sure, anchor):
            return self._reject(seen, NOT_FOLLOWING)
        if self._exceeds_gain(seen):
            return self._reject(seen, EXCEEDS_GAIN)
        self._window.append(seen)
        return self._accept(seen, reach, corrected)

    # Pieces ---------------------------------------------------------------------------------------------------
    def _outside_envelope(self, position: list[float]) -> bool:
        # map: no Python frame per axis (runs for every state); a NaN compares False, so it is outside
        return not (all(map(operator.le, self._env_low, position)) and all(map(operator.le, position, self._env_high)))

    def _too_fast(self, motion: list[float], elapsed_s: float) -> bool:
        """A move beyond the plausible speed over ``elapsed_s`` seconds, on any axis (noise allowed for)."""
        limit = self._speed_m_s * elapsed_s + SPEED_MARGIN_M
        return any(abs(m) - n > limit for m, n in zip(motion, self._noise_check_m, strict=True))

    def _not_following(self, motion: list[float], moves: list[list[float]], anchor: Seen) -> bool:
        """The arm moved less along the commands certainly applied (``moves``, command units) than
        ``FOLLOW_FRACTION`` of what they move it at the spec's nominal gain, allowing for the previous step's motion
        carried against them (``CARRY_FRACTION`` of it), for commands that reverse one another (``REVERSAL_SLACK`` of
        their path beyond their net move: the arm lags each reversal) and for the noise: a position sensor that froze,
        an arm that is blocked, or a robot reporting commands applied that it did not execute. Not judged below
        ``MIN_FOLLOW_M`` of expected net motion."""
        if not moves:
            return False
        gains = self._follow_m_per_unit
        expected = [[u * k for u, k in zip(move, gains, strict=True)] for move in moves]
        net, length, path = net_move(expected)
        if length < MIN_FOLLOW_M:
            return False
        carried_against = max(0.0, -sum(m * e for m, e in zip(anchor.motion, net, strict=True)) / length)
        return falls_short(motion, net, length, path, CARRY_FRACTION * carried_against + self.follow_noise_m)

    def _exceeds_gain(self, seen: Seen) -> bool:
        """Over the window ending with ``seen``: the length of the summed motion beyond the summed reach of the
        commands at the gain bound, plus the first step's carry and one margin (a robot faster than its spec). A
        window whose commands reach less than ``MIN_FOLLOW_M`` judges no gain: an arm held still near the edge of
        its reach sags and settles by itself (the simulated Fetch 2-3 mm per step), which says nothing of how far a
        command moves it; each such step is still bounded by ``unexplained_motion``."""
        window = [*self._window, seen]
        if len(window) < GAIN_WINDOW:
            return False
        commanded = sum(s.reach for s in window)
        if commanded < MIN_FOLLOW_M:
            return False
        moved = math.hypot(*(sum(axis) for axis in zip(*(s.motion for s in window), strict=True)))
        reach = commanded + CARRY_FRACTION * math.hypot(*window[0].motion)
        return moved > reach + self._motion_margin_m

    def _accept(self, seen: Seen, reach: float | None, clock_corrected: bool = False) -> Verdict:
        """Make ``seen`` the anchor; its bounds: the position, widened toward where the previous anchor plus
        ``reach`` metres (None: no previous anchor) could have taken the arm, and by the noise."""
        transit = seen.t_recv - seen.t_robot
        previous_anchor = self.anchor
        if previous_anchor is None:
            self.offset_s = transit
        else:  # the fastest transit, allowed to creep up as a slower robot clock falls behind ours
            creep = OFFSET_DRIFT_S_PER_S * max(0.0, seen.t_recv - previous_anchor.t_recv)
            self.offset_s = min(self.offset_s + creep, transit)
        self.anchor = seen
        self.chain.clear()
        moved = previous_anchor is not None and reach is not None
        previous = previous_anchor.position if moved else seen.position  # type: ignore[union-attr]
        low, high = motion_bound(seen.position, previous, reach or 0.0, self._noise_bound_m)
        return Verdict(True, "", False, low, high, clock_corrected, tuple(seen.motion) if moved else ())

    def _reject(self, seen: Seen, kind: str) -> Verdict:
        """Reject ``seen``; re-anchor when it completes a consistent chain that a restart explains."""
        restart = self.chain.add(seen, kind)
        if kind in NEVER_ANCHOR_KINDS or not restart:
            return Verdict(False, kind)
        self.offset_s = self.chain.fastest_transit_s()
        self.chain.clear()
        self._home_expected = False  # a HOME sent before the restart is void: the rebooted robot's motion is checked
        self.anchor = seen  # its motion is zero: nothing is carried across a restart
        low = tuple(p - n for p, n in zip(seen.position, self._noise_bound_m, strict=True))
        high = tuple(p + n for p, n in zip(seen.position, self._noise_bound_m, strict=True))
        return Verdict(False, kind, True, low, high)

    def _consistent(self, older: Seen, newer: Seen) -> bool:
        """Two rejected states that could come from one running robot: newer sequence and clock, a plausible gap,
        a plausible speed, both inside the envelope."""
        if not (seq_newer(newer.seq, older.seq) and newer.t_robot > older.t_robot):
            return False
        if self._outside_envelope(newer.position) or self._outside_envelope(older.position):
            return False
        if self.stamps.seq_gap(older, newer):
            return False
        elapsed = self.stamps.elapsed_s(newer, older)
        motion = [n - o for n, o in zip(newer.position, older.position, strict=True)]
        return not self._too_fast(motion, elapsed)
