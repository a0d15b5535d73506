"""What the control loop believes of each fresh state, and what a rejected one costs.

numpy only (robot side). A fresh, finite state's delay line must name only commands this loop sent, in the order sent,
following from the last accepted line as a robot that applies it oldest first would (``CommandLine``, ``line_order``);
then ``state_check.StateChecker`` judges it (and bounds where the gripper is, for the barrier); then, for a robot
without a line, ``UnreportedFollowing`` reckons whether the arm follows the commands sent. An accepted state becomes the
anchor and refreshes the watchdog (``last_valid_t``). A rejected one (or a non-finite or malformed one) is held and
counted, never planned with; ``reject`` says when it calls for a safe stop: ``max_implausible_states`` in a row,
``max_rejected_in_window`` of the last ``rejection_window_states``, no valid state for ``watchdog_stop_s``, or at once
when the arm did not follow the commands it applied (``not_following``). A task with a block: ``block_check.BlockCheck``
judges the block's position once the gripper's is accepted (``block_jump``, ``block_moved_alone``) and says when the
block left the table (``episode_end_reason``).
"""

from __future__ import annotations

import logging
import math
from collections import Counter

from deploy.contract import ObservationContract
from deploy.robot_spec import RobotSpec
from deploy.runtime.block_check import BLOCK_OFF_TABLE, BlockCheck
from deploy.runtime.command_line import CommandLine, newest_listed
from deploy.runtime.line_order import not_fifo, out_of_order
from deploy.runtime.loop_config import LoopConfig
from deploy.runtime.position_bound import DEFAULT_MAX_UNCONFIRMED_M, MIN_CONFIRM_M, MOTION_UNCONFIRMED, PositionBound
from deploy.runtime.rejection_window import RejectionWindow
from deploy.runtime.state_check import (
    HOMED_OFF_HOME,
    NOT_FOLLOWING,
    PENDING_NOT_FIFO,
    PENDING_ORDER,
    UNSENT_PENDING,
    StateChecker,
    Verdict,
)
from deploy.runtime.unreported_following import UnreportedFollowing
from deploy.wire import StateFlags, StateMsg

logger = logging.getLogger(__name__)

HOMED = int(StateFlags.HOMED)  # as a plain int: ``int & StateFlags.X`` runs enum's Python operators
REJECTED_TOO_OFTEN = "rejected_too_often"  # count: safe stops for max_rejected_in_window of the last states
OFF_HOME_REASON = f"implausible_{HOMED_OFF_HOME}"
NOT_FOLLOWING_REASON = f"implausible_{NOT_FOLLOWING}"
UNCONFIRMED_REASON = f"implausible_{MOTION_UNCONFIRMED}"
HOME_NOT_REACHED = "home_not_reached"  # a HOMED state off the home after motion no state confirmed
HOME_NOT_REACHED_REASON = f"implausible_{HOME_NOT_REACHED}"
# metres of unconfirmed reckoning at a HOME above which a HOMED answer off the home means the arm cannot move: twice
# what a state could have confirmed (an honest episode's last commands in flight span less)
HOME_DOUBT_M = 2 * MIN_CONFIRM_M
UNCONFIRMABLE_EXTRA_STEPS = 2  # beyond the delay: the newest command sent, and a step of alignment
NO_DELAY_LINE = "no_delay_line"  # count (once): the robot reports no delay line (following: unreported_following)
STOP_AT_ONCE = {
    NOT_FOLLOWING_REASON: (
        "the arm did not move along the commands it applied (implausible_not_following; by its delay line, or by the "
        "spec's delay for a robot without one): it is blocked (contact?) or its position sensor froze; check the arm "
        "and its surroundings before resuming"
    ),
    UNCONFIRMED_REASON: (
        "no state confirmed the arm's motion while the commands could have moved it {span:.3f} m (implausible_"
        "motion_unconfirmed): the position sensor may be frozen or the motors stalled; check the arm before resuming"
    ),
    HOME_NOT_REACHED_REASON: (
        "the robot answered HOMED away from the home after commands that could have moved it {doubt:.3f} m went "
        "unconfirmed (implausible_home_not_reached): the motors may be stalled or the position sensor frozen; check "
        "the arm before resuming"
    ),
}


def position_bound_for(spec: RobotSpec, dims: int, follow_noise_m: float, largest_move_m: float) -> PositionBound:
    """The runtime's position bound for a robot of ``spec`` (``follow_noise_m``: ``StateChecker.follow_noise_m``;
    ``largest_move_m``: the largest command's move at command scale, metres). Commands in flight or not yet certainly
    applied cannot confirm anything yet: the reckoning may span their reach on top of the allowance before the motion
    is called unconfirmed."""
    lag_m = (spec.delay_range[1] + UNCONFIRMABLE_EXTRA_STEPS) * spec.max_step_m
    max_unconfirmed_m = DEFAULT_MAX_UNCONFIRMED_M + lag_m
    return PositionBound(dims, spec.actuator_gain_max, follow_noise_m, largest_move_m, max_unconfirmed_m)


class StateIntake:
    """The checks every fresh state passes, the anchor, the position bound and the rejection counts.

    :param spec: the robot spec.
    :param contract: the policy's contract (where the position sits in the state).
    :param period_s: the loop's control period (seconds).
    :param config: the loop's settings (resync states, rejection limits).
    :param line: the commands in flight (shared with the command path; only its queries are used here).
    :param counts: the loop's counters (``implausible_<kind>`` and the like are added here).
    :param checker_class: the state checker (a benchmark swaps in one that accepts everything).
    """

    def __init__(
        self,
        spec: RobotSpec,
        contract: ObservationContract,
        period_s: float,
        config: LoopConfig,
        line: CommandLine,
        counts: Counter[str],
        checker_class: type[StateChecker] = StateChecker,
    ) -> None:
        self.checker = checker_class(spec, contract, period_s, resync_states=config.resync_states)
        self.unreported = UnreportedFollowing(spec, contract, self.checker.follow_noise_m)
        scale = contract.action_scale_m
        largest_move_m = line.largest_command * scale
        self.bound = position_bound_for(spec, contract.goal_dim, self.checker.follow_noise_m, largest_move_m)
        self._command_scale_m = scale
        self._follow_m_per_unit = [spec.command_scale_m * g for g in spec.actuator_gain]
        self.line = line
        self.counts = counts
        self._pos = slice(*contract.position_slice)
        tracker = spec.block_tracker
        self.block = (
            BlockCheck(tracker, contract, period_s, spec.max_step_m) if contract.has_block and tracker else None
        )
        self._max_in_a_row = config.max_implausible_states
        self._window = RejectionWindow(config.rejection_window_states, config.max_rejected_in_window)
        self._window_text = (
            f"max_rejected_in_window {config.max_rejected_in_window} of rejection_window_states "
            f"{config.rejection_window_states}"
        )
        self.anchor: StateMsg | None = None  # the last accepted state
        self._anchor_sent_seq: int | None = None  # the newest command the robot had when it made the anchor
        self.last_valid_t = -math.inf  # local time the newest accepted state was made (estimated, seconds)
        self.in_a_row = 0  # rejected states in a row
        self.to_note: tuple[float, StateMsg, Verdict] | None = None  # accepted: its bookkeeping after the answer
        self.home_doubt_m = 0.0  # the unconfirmed reckoning when the awaited HOME went out (metres, widest axis)

    @property
    def bounds(self) -> tuple[tuple[float, ...], tuple[float, ...]] | None:
        """Where the gripper can be (metres per axis: low, high); None before the first accepted state."""
        bound = self.bound
        return None if bound.low is None or bound.high is None else (bound.low, bound.high)

    @property
    def reports_line(self) -> bool:
        """The robot reported its delay line in the last accepted state."""
        return self.anchor is not None and bool(self.anchor.pending)

    def reset(self) -> None:
        """Forget the anchor, the bound and the rejections (a safe stop: the robot is re-homed and judged afresh)."""
        self.restart_checks()
        self.anchor = None
        self.in_a_row = 0
        self.home_doubt_m = 0.0
        self._window.reset()

    def restart_checks(self) -> None:
        """A reopened port or a stop: the next accepted state is a new anchor and a trusted reference."""
        self.checker.reset()
        self.unreported.reset()
        self.bound.reset()
        if self.block is not None:
            self.block.reset()

    def expect_home(self) -> None:
        """A HOME was sent: the arm moves by itself until its HOMED state is accepted. The motion no state confirmed
        before it is kept until then (states while homing are new references): a HOMED answer off the home after it
        shows an arm that cannot move."""
        if self.bound.low is not None:
            self.home_doubt_m = max(self.home_doubt_m, self.bound.span_m)
        self.checker.expect_home()
        self.unreported.reset()
        if self.block is not None:
            self.block.reset()  # the block is placed anew with the arm's home

    def new_episode(self) -> None:
        """The robot homed by itself or restarted: what it applied before is gone."""
        self.unreported.reset()
        if self.block is not None:
            self.block.reset()

    def episode_end_reason(self) -> str:
        """Why the episode under way must end now ("" for no reason): the block fell off the table."""
        return BLOCK_OFF_TABLE if self.block is not None and self.block.off_table else ""

    # The check --------------------------------------------------------------------------------------------------
    def check(self, msg: StateMsg, t_in: float, prompts: int) -> Verdict:
        """Check the delay line against the commands sent, then the state checker, the following of a robot without
        a line and the position bound; an accepted state becomes the anchor and refreshes the watchdog. A line naming
        a command never sent is implausible: the robot's numbering is wrong, so its history and the commands in
        flight cannot be known (the checker never sees it). ``prompts``: messages the loop has sent so far."""
        line = self.line
        if line.unsent(msg.pending):
            return self._rejected(Verdict(False, UNSENT_PENDING))
        if out_of_order(msg.pending):
            return self._rejected(Verdict(False, PENDING_ORDER))
        old_pending = self.anchor.pending if self.anchor is not None else ()
        if not_fifo(old_pending, msg.pending):
            return self._rejected(Verdict(False, PENDING_NOT_FIFO))
        applied = line.applied_length(old_pending, msg.pending, self._anchor_sent_seq)
        homed = bool(msg.flags & HOMED)
        for_sure = line.applied_for_sure(old_pending, msg.pending)
        # The checker measures motion from its own anchor, which a state it accepted and this intake then rejected
        # (beside_commands, a block fault) has moved past this intake's: what the arm must have followed is counted
        # from that same state, or honest states fall short of moves made before it.
        checker_anchor = self.checker.anchor
        checker_for_sure = (
            for_sure
            if checker_anchor is None or checker_anchor.pending == old_pending
            else line.applied_for_sure(checker_anchor.pending, msg.pending)
        )
        home_expected = self.checker.home_expected  # before the check: a HOMED state accepted ends it
        verdict = self.checker.check(msg, t_in, applied, homed, prompts, checker_for_sure)
        if verdict.kind == HOMED_OFF_HOME and self.home_doubt_m >= HOME_DOUBT_M:
            return self._rejected(Verdict(False, HOME_NOT_REACHED))
        if verdict.accepted and homed:
            self.home_doubt_m = 0.0
        if verdict.accepted and (kind := self._follows(msg, homed or home_expected)):
            # the checker took it as its anchor; the immediate safe stop resets every check
            return self._rejected(Verdict(False, kind))
        if verdict.accepted and (kind := self._judge_block(msg, homed or home_expected)):
            return self._rejected(Verdict(False, kind))  # like _follows: the checker took it as its anchor
        if verdict.accepted and (kind := self._fold_into_bound(msg, verdict, old_pending, for_sure)):
            return self._rejected(Verdict(False, kind))
        if verdict.restart:
            self._new_reference(msg, verdict)
        if verdict.accepted or verdict.restart:
            if self.block is not None:
                self.block.accept(msg.state.tolist())
            self.anchor = msg
            # The newest command its line lists: any sent after it may still have been on the way (FIFO). For a line
            # of holds only (a HOMED state: the robot dropped what it had), the newest command sent: one still on
            # the way that came and went unseen is then missing from the reckoning, which rejects (never accepts)
            # the motion it made.
            listed = newest_listed(msg.pending)
            self._anchor_sent_seq = line.last_sent_seq if listed is None else listed
            self.last_valid_t = self.checker.robot_time_local(msg.t_s)
            self.to_note = (t_in, msg, verdict)
            return verdict
        return self._rejected(verdict)

    def _follows(self, msg: StateMsg, homing: bool) -> str:
        """An accepted state's following, for a robot without a line: "" or ``not_following``."""
        if msg.pending:
            return ""
        self._warn_no_line()
        if homing:
            self.unreported.reset()  # the arm moved home by itself
        elif self.unreported.not_following(msg.state[self._pos].tolist()):
            return NOT_FOLLOWING
        return ""

    def _judge_block(self, msg: StateMsg, homing: bool) -> str:
        """The block check of an accepted state: "" or its rejection kind (a HOMED state places the block anew)."""
        if self.block is None or homing:
            return ""
        return self.block.judge(msg.state.tolist())

    def _fold_into_bound(
        self, msg: StateMsg, verdict: Verdict, old_pending: tuple[int, ...], for_sure: list[list[float]] | None
    ) -> str:
        """Fold an accepted state into the position bound: "" or the fault it shows (``not_following``,
        ``motion_unconfirmed``). A state with no motion reference before it (the first, HOMED) is a new reference."""
        if not verdict.motion_m:
            self._new_reference(msg, verdict)
            return ""
        scale = self._command_scale_m
        moves = self.line.applied_moves(old_pending, msg.pending, self._anchor_sent_seq)
        applied = [(seq, None if m is None else [u * scale for u in m]) for seq, m in moves]
        if msg.pending:
            gains = self._follow_m_per_unit
            certain = None if for_sure is None else [[u * k for u, k in zip(m, gains, strict=True)] for m in for_sure]
        else:
            certain = self.unreported.newly_certain()
        position = msg.state[self._pos].tolist()
        kind = self.bound.update(position, verdict.low, verdict.high, applied, certain, verdict.motion_m)  # type: ignore[arg-type]
        if self.bound.confirmed:
            self.unreported.mark_reference()
        return kind

    def _new_reference(self, msg: StateMsg, verdict: Verdict) -> None:
        self.bound.anchor(msg.state[self._pos].tolist(), verdict.low, verdict.high)  # type: ignore[arg-type]
        self.unreported.mark_reference()

    def _rejected(self, verdict: Verdict) -> Verdict:
        self.counts[f"implausible_{verdict.kind}"] += 1
        if self.block is not None:
            self.block.rejected()
        return verdict

    def _warn_no_line(self) -> None:
        if self.counts[NO_DELAY_LINE]:
            return
        self.counts[NO_DELAY_LINE] += 1  # once per run: the robot says nothing of which commands it applied
        logger.warning(
            "the robot reports no delay line (m = 0): whether the arm follows its commands is reckoned from the "
            "spec's delay over several states, so a frozen position sensor or a blocked arm is caught 5 steps "
            "late instead of 2 (README, Safety); give the robot's firmware its line"
        )

    # What a verdict costs ----------------------------------------------------------------------------------------
    def count_accepted(self) -> None:
        """An accepted state in a checked mode (HOLD, HOMING, RUN): the run of rejections ends."""
        self.in_a_row = 0
        self._window.record()

    def reject(self, reason: str, now: float, watchdog_stop_s: float) -> str:
        """A state was rejected (or non-finite, or malformed) in a checked mode, for ``reason`` (the tick log's
        last reason): the safe stop it calls for ("" for none, the tick holds)."""
        self.in_a_row += 1
        # A HOMED state off the home is homing's to judge (max_home_retries, whose stop names the home and the fix)
        too_often = reason != OFF_HOME_REASON and self._window.record(reason)
        stale_s = now - self.last_valid_t
        if self.in_a_row >= self._max_in_a_row or stale_s > watchdog_stop_s:
            return (
                f"{self.in_a_row} implausible, non-finite or malformed states in a row, no valid state for "
                f"{stale_s:.3f} s (last: {reason})"
            )
        if reason in STOP_AT_ONCE:  # stop now: the e-stop also drops the commands still in the robot's line
            return STOP_AT_ONCE[reason].format(span=self.bound.span_m, doubt=self.home_doubt_m)
        if too_often:
            self.counts[REJECTED_TOO_OFTEN] += 1
            return (
                f"{self._window.summary()}: the robot is wrong too often to be driven ({self._window_text}); check its "
                "sensors, its link and its line bookkeeping"
            )
        return ""
