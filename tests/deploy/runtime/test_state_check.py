"""StateChecker on hand-made states: what it accepts, what it rejects and why, and the bounds it gives the barrier.

The loop-level behaviour (a lying robot over a real pty) is in test_untrusted_states.py; these pin the arithmetic.
Spec: the simulated robot's (no noise, gain bound 0.7317, 0.05 m per unit, 40 ms period, 1.3719 m/s).
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest

from deploy.contract import fetch_reach_contract
from deploy.robot_spec import RobotSpec, load_robot_spec
from deploy.runtime.field_bounds import VELOCITY_MARGIN
from deploy.runtime.state_check import (
    EXCEEDS_GAIN,
    FIELD_OUT_OF_RANGE,
    HOMED_OFF_HOME,
    MOTION_MARGIN_M,
    NOT_FOLLOWING,
    OUTSIDE_ENVELOPE,
    SEQ_BACKWARDS,
    SEQ_GAP,
    TIME_AHEAD,
    TOO_FAST,
    UNEXPLAINED_MOTION,
    StateChecker,
)
from deploy.runtime.state_stamps import MSGS_PER_STEP
from deploy.wire import SEQ_MAX, StateFlags, StateMsg, seq_after

CONTRACT = fetch_reach_contract(2)
SPEC = load_robot_spec()
PERIOD_S = SPEC.control_period_s
STEP_M = SPEC.command_scale_m * SPEC.actuator_gain_max  # metres one full unit command can move the arm
START = (1.3, 0.75, 0.6)
NO_HOME_SPEC = dataclasses.replace(SPEC, home_position_m=None, home_tolerance_m=0.0)


def state_msg(seq: int, position, t_s: float | None = None) -> StateMsg:
    state = np.zeros(CONTRACT.state_dim)
    state[:3] = position
    return StateMsg(seq, seq * PERIOD_S if t_s is None else t_s, state, 0, (0, 0))


def anchored(spec: RobotSpec = SPEC) -> StateChecker:
    checker = StateChecker(spec, CONTRACT, PERIOD_S)
    assert checker.check(state_msg(1, START), t_recv=PERIOD_S + 1e-4, applied_units=0.0).accepted
    return checker


def test_motion_the_commands_explain_is_accepted_with_bounds_toward_the_anchor() -> None:
    checker = anchored()
    moved = (START[0] + 0.9 * STEP_M, START[1], START[2])  # 0.9 of what one full command allows
    verdict = checker.check(state_msg(2, moved), 2 * PERIOD_S + 1e-4, applied_units=1.0)
    assert verdict.accepted and verdict.kind == ""
    # the barrier's bounds span the anchor +- the reach, and the measured position (no noise in this spec)
    assert verdict.low[0] == pytest.approx(START[0] - STEP_M)
    assert verdict.high[0] == pytest.approx(START[0] + STEP_M)
    assert verdict.low[1] == pytest.approx(START[1] - STEP_M) and verdict.high[1] == pytest.approx(START[1] + STEP_M)


def test_a_glitch_beyond_the_commands_is_unexplained_motion() -> None:
    checker = anchored()
    jump = STEP_M + MOTION_MARGIN_M + 0.005  # one command's reach, the margin, 5 mm more
    verdict = checker.check(state_msg(2, (START[0] + jump, START[1], START[2])), 2 * PERIOD_S, applied_units=1.0)
    assert not verdict.accepted and verdict.kind == UNEXPLAINED_MOTION
    # the anchor stays: the next good state is judged against it
    assert checker.anchor.position == list(START)


def test_the_reach_is_the_euclidean_length_of_the_commands() -> None:
    """A diagonal move of length 1.0 unit is explained by commands of summed length 1.0 (not by axis)."""
    checker = anchored()
    d = 0.99 * STEP_M / math.sqrt(3.0)
    verdict = checker.check(state_msg(2, tuple(p + d for p in START)), 2 * PERIOD_S, applied_units=1.0)
    assert verdict.accepted
    checker = anchored()
    far = (STEP_M + MOTION_MARGIN_M) / math.sqrt(3.0) + 0.003
    verdict = checker.check(state_msg(2, tuple(p + far for p in START)), 2 * PERIOD_S, applied_units=1.0)
    assert verdict.kind == UNEXPLAINED_MOTION


@pytest.mark.parametrize("bad", [1e30, -1e30, float("nan")])
def test_a_position_outside_the_envelope_or_nan_is_rejected(bad: float) -> None:
    checker = anchored()
    verdict = checker.check(state_msg(2, (bad, START[1], START[2])), 2 * PERIOD_S, applied_units=1.0)
    assert verdict.kind == OUTSIDE_ENVELOPE


# fetch_reach state: grip_pos 0:3 (m) | gripper_state 3:5 (finger joints, m) | grip_velp 5:8 | gripper_vel 8:10 (m/step)
FINGER, VELOCITY, FINGER_VELOCITY = 3, 5, 8
VELOCITY_LIMIT = VELOCITY_MARGIN * SPEC.plausible_speed_m_s * SPEC.control_period_s  # 2 x 1.3719 x 0.04 = 0.110 m/step


def with_value(seq: int, index: int, value: float) -> StateMsg:
    msg = state_msg(seq, START)
    msg.state[index] = value
    return msg


@pytest.mark.parametrize(
    ("index", "value"),
    [
        (VELOCITY, 1e30),  # a velocity glitch: the position is fine
        (VELOCITY, -1.01 * VELOCITY_LIMIT),  # just past the bound: 2.8 m/s
        (FINGER_VELOCITY, 1e30),
        (FINGER, -7.0),  # a finger joint 7 m from its zero: longer than the envelope's diagonal (1.43 m)
        (FINGER, float("nan")),
        (FINGER, 0.052),  # past the finger joint's range the spec gives (state_bounds: [-0.001, 0.051], no noise)
        (FINGER, -0.002),
    ],
)
def test_a_state_field_beyond_its_bound_is_rejected(index: int, value: float) -> None:
    """Every state value has a bound, not only the position: a velocity at most VELOCITY_MARGIN x the plausible
    speed per control step, any other value at most the envelope's diagonal. The anchor stays."""
    checker = anchored()
    verdict = checker.check(with_value(2, index, value), 2 * PERIOD_S, applied_units=0.0)
    assert not verdict.accepted and verdict.kind == FIELD_OUT_OF_RANGE
    assert checker.anchor.seq == 1


@pytest.mark.parametrize(("index", "value"), [(VELOCITY, 0.99 * VELOCITY_LIMIT), (FINGER, 0.05), (FINGER, 0.0)])
def test_a_state_field_inside_its_bound_is_accepted(index: int, value: float) -> None:
    checker = anchored()
    assert checker.check(with_value(2, index, value), 2 * PERIOD_S, applied_units=0.0).accepted


def test_a_field_the_spec_does_not_bound_has_the_envelope_diagonal() -> None:
    unbounded = dataclasses.replace(SPEC, state_bounds=None)
    checker = anchored(unbounded)
    assert checker.check(with_value(2, FINGER, -0.5), 2 * PERIOD_S, applied_units=0.0).accepted
    assert checker.check(with_value(3, FINGER, -7.0), 3 * PERIOD_S, applied_units=0.0).kind == FIELD_OUT_OF_RANGE


def test_a_spec_bound_is_widened_by_the_noise_allowance() -> None:
    noisy = dataclasses.replace(SPEC, observation_noise_std_m=(0.001, 0.001, 0.002))  # 4 sigma of the largest: 8 mm
    checker = anchored(noisy)
    assert checker.check(with_value(2, FINGER, 0.058), 2 * PERIOD_S, applied_units=0.0).accepted
    assert checker.check(with_value(3, FINGER, 0.060), 3 * PERIOD_S, applied_units=0.0).kind == FIELD_OUT_OF_RANGE


@pytest.mark.parametrize(
    ("name", "match"),
    [
        ("gripper_stat", r"'state_bounds.gripper_stat' is no state field of the policy's observation contract"),
        ("grip_pos", r"'state_bounds.grip_pos' is the position, which the workspace bounds"),
    ],
)
def test_a_spec_bounding_a_field_the_contract_lacks_is_refused(name: str, match: str) -> None:
    """A misspelt field name would leave the real field with the loose default: the checker refuses to start."""
    spec = dataclasses.replace(SPEC, state_bounds={name: (0.0, 0.05)})
    with pytest.raises(ValueError, match=match + r".*may bound: gripper_state, grip_velp, gripper_vel"):
        StateChecker(spec, CONTRACT, PERIOD_S)


def test_time_ahead_and_sequence_backwards() -> None:
    checker = anchored()
    ahead = checker.check(state_msg(2, START, t_s=2 * PERIOD_S + 5.0), 2 * PERIOD_S, applied_units=0.0)
    assert ahead.kind == TIME_AHEAD
    backwards = checker.check(state_msg(1, START, t_s=3 * PERIOD_S), 3 * PERIOD_S, applied_units=0.0)
    assert backwards.kind == SEQ_BACKWARDS


def _after(seq: int, messages: int) -> int:
    for _ in range(messages):
        seq = seq_after(seq)
    return seq


@pytest.mark.parametrize("anchor_seq", [1000, SEQ_MAX - 3])
@pytest.mark.parametrize("extra", [0, 1])
def test_the_sequence_gap_counts_messages_across_the_wrap(anchor_seq: int, extra: int) -> None:
    """Within a period of the anchor a state may be numbered ``slack + MSGS_PER_STEP`` messages later, not one more;
    across the wrap (SEQ_MAX -> 1: 0 is skipped) the count is the same as anywhere else."""
    checker = StateChecker(SPEC, CONTRACT, PERIOD_S)
    assert checker.check(state_msg(anchor_seq, START, t_s=1.0), t_recv=1.0 + 1e-4, applied_units=0.0).accepted
    messages = checker.stamps.seq_gap_slack + MSGS_PER_STEP + extra
    t_s = 1.0 + 0.5 * PERIOD_S  # within one control step
    verdict = checker.check(state_msg(_after(anchor_seq, messages), START, t_s=t_s), t_s + 1e-4, applied_units=0.0)
    assert verdict.kind == ("" if extra == 0 else SEQ_GAP)


def test_a_robot_faster_than_its_gain_bound_is_caught_over_the_window() -> None:
    """Each step moves 1.3x what the bound allows, inside the per-step margin; summed over the window it is not."""
    checker = anchored()
    position = list(START)
    kinds = []
    for seq in range(2, 12):
        position[0] += 1.3 * STEP_M * 0.3  # commands of 0.3 units
        verdict = checker.check(state_msg(seq, position), seq * PERIOD_S, applied_units=0.3)
        kinds.append(verdict.kind)
        if not verdict.accepted:
            break
    assert kinds[0] == "" and kinds[-1] == EXCEEDS_GAIN


def test_after_a_home_the_arm_may_be_anywhere_until_the_homed_state_comes() -> None:
    """After a HOME the arm moves by itself: a jump no command explains is accepted (the HOMED state may have been
    lost) until a HOMED state is accepted; from then on motion is checked again. Envelope and time still apply."""
    checker = anchored(NO_HOME_SPEC)  # a spec without a home pose: the HOMED state may be anywhere in the envelope
    checker.expect_home()
    home = (START[0] + 0.1, START[1] - 0.1, START[2])  # 14 cm away: far beyond one command and the margin
    assert checker.check(state_msg(2, home), 2 * PERIOD_S, applied_units=0.0).accepted  # no HOMED flag: lost
    assert checker.check(state_msg(3, (1e30, 0.0, 0.0)), 3 * PERIOD_S, 0.0).kind == OUTSIDE_ENVELOPE
    assert checker.check(state_msg(4, home, t_s=PERIOD_S), 4 * PERIOD_S, 0.0).kind == "time_backwards"
    homed = StateMsg(5, 5 * PERIOD_S, state_msg(5, home).state, int(StateFlags.HOMED), (0, 0))
    assert checker.check(homed, 5 * PERIOD_S, applied_units=0.0, homed=True).accepted
    away = (home[0] + 0.04, home[1], home[2])  # slower than the plausible speed, but no command explains it
    assert checker.check(state_msg(6, away), 6 * PERIOD_S, applied_units=0.0).kind == UNEXPLAINED_MOTION


def homed_msg(seq: int, position) -> StateMsg:
    return StateMsg(seq, seq * PERIOD_S, state_msg(seq, position).state, int(StateFlags.HOMED), (0, 0))


def test_a_homed_state_away_from_the_spec_home_is_a_glitch_never_an_anchor() -> None:
    """The HOMED state is what the episode's first command is planned from: one further from the spec's home pose
    than its tolerance plus the noise is rejected, the anchor stays, and the arm's real HOMED state is accepted."""
    home = SPEC.home_position_m
    assert home is not None
    checker = anchored()
    checker.expect_home()
    anchor = checker.anchor
    off = (home[0], home[1], home[2] + SPEC.home_tolerance_m + 0.002)  # 2 mm beyond the tolerance (no noise)
    for seq in range(2, 2 + checker.chain.resync_states + 2):  # a robot that keeps homing there never re-anchors
        verdict = checker.check(homed_msg(seq, off), seq * PERIOD_S, applied_units=0.0, homed=True)
        assert not verdict.accepted and verdict.kind == HOMED_OFF_HOME and not verdict.restart
        assert checker.anchor is anchor
    assert checker.home_error_m == pytest.approx(SPEC.home_tolerance_m + 0.002)
    seq = 2 + checker.chain.resync_states + 2
    inside = (home[0] + 0.8 * SPEC.home_tolerance_m, home[1], home[2])
    assert checker.check(homed_msg(seq, inside), seq * PERIOD_S, applied_units=0.0, homed=True).accepted


def test_a_homed_state_no_home_awaits_is_accepted_at_the_spec_home_only() -> None:
    """No HOME was sent (the robot homed by itself, or answers a resent HOME late): the jump from mid-reach to the
    spec's home is the arm's own homing, not a glitch, so it is accepted without the motion checks (the loop then
    decides what it means); without the HOMED flag the same jump is too fast, and with the flag away from the home
    it is homed_off_home. Without a home pose in the spec nothing vouches for the flag: motion is checked."""
    home = SPEC.home_position_m
    assert home is not None and math.dist(home, START) > 0.05  # far beyond one control step
    assert anchored().check(state_msg(2, home), 2 * PERIOD_S, applied_units=0.0).kind == TOO_FAST
    off = (home[0], home[1], home[2] + 0.05)
    assert anchored().check(homed_msg(2, off), 2 * PERIOD_S, 0.0, homed=True).kind == HOMED_OFF_HOME
    checker = anchored()
    assert checker.check(homed_msg(2, home), 2 * PERIOD_S, applied_units=0.0, homed=True).accepted
    away = (home[0] + 0.04, home[1], home[2])  # and from there on motion is checked against the home
    assert checker.check(state_msg(3, away), 3 * PERIOD_S, applied_units=0.0).kind == UNEXPLAINED_MOTION
    unvouched = anchored(NO_HOME_SPEC).check(homed_msg(2, home), 2 * PERIOD_S, applied_units=0.0, homed=True)
    assert unvouched.kind == TOO_FAST


FULL_Y = [[0.0, -1.0, 0.0]]  # one full command toward -y, certainly applied (command units)


def test_an_arm_that_does_not_move_along_an_applied_command_is_not_following() -> None:
    """A state that shows a full command applied and no motion (a frozen sensor, a blocked arm) is rejected; one
    that moved along it by a plausible share is accepted; a hold applied, or nothing known, is not judged."""
    checker = anchored()
    assert checker.check(state_msg(2, START), 2 * PERIOD_S, 1.0, applied_for_sure=FULL_Y).kind == NOT_FOLLOWING
    checker = anchored()
    moved = (START[0], START[1] - 0.2 * STEP_M, START[2])  # a fifth of a step: slow, but following
    assert checker.check(state_msg(2, moved), 2 * PERIOD_S, 1.0, applied_for_sure=FULL_Y).accepted
    for applied in ([], [[0.0, 0.0, 0.0]], None):
        still = anchored().check(state_msg(2, START), 2 * PERIOD_S, 1.0, applied_for_sure=applied)
        assert still.accepted, applied


def test_following_allows_for_motion_carried_against_the_command_and_for_reversals() -> None:
    """The arm moving toward +y may not turn within a step: half its last motion against the command is excused.
    Two commands that cancel (+y then -y) are not judged by their net move (the arm lags each reversal)."""
    checker = anchored()
    step = 0.6 * STEP_M
    toward_plus = (START[0], START[1] + step, START[2])
    assert checker.check(state_msg(2, toward_plus), 2 * PERIOD_S, 1.0, applied_for_sure=[[0.0, 1.0, 0.0]]).accepted
    # commanded -y now; the arm went on another 0.4 step toward +y (within half of the 0.6 step it carried)
    went_on = (START[0], START[1] + step + 0.4 * step, START[2])
    assert checker.check(state_msg(3, went_on), 3 * PERIOD_S, 1.0, applied_for_sure=FULL_Y).accepted
    there_and_back = [[0.0, 1.0, 0.0], [0.0, -0.6, 0.0]]  # net 0.4 toward +y, a path of 1.6
    reversed_ = anchored().check(state_msg(2, START), 2 * PERIOD_S, 1.6, applied_for_sure=there_and_back)
    assert reversed_.accepted


def test_the_home_tolerance_grows_by_the_noise_allowance() -> None:
    noisy = dataclasses.replace(SPEC, observation_noise_std_m=(0.001, 0.002, 0.002))
    checker = StateChecker(noisy, CONTRACT, PERIOD_S)
    assert checker.home_tolerance_m == pytest.approx(SPEC.home_tolerance_m + 4.0 * 0.003)


def test_without_a_home_pose_a_homed_state_is_not_checked_against_one() -> None:
    checker = anchored(NO_HOME_SPEC)
    checker.expect_home()
    far = (START[0] + 0.2, START[1], START[2])
    assert checker.check(homed_msg(2, far), 2 * PERIOD_S, applied_units=0.0, homed=True).accepted


@pytest.mark.parametrize("step_s", [5.0, -5.0])
def test_a_clock_step_forward_corrects_the_offset_and_one_backward_is_a_restart(step_s: float) -> None:
    """The robot's clock steps by ``step_s`` (an NTP step) while its sequence and the arm carry on. Ahead: the
    states look younger than they can be; once ``resync_states`` in a row agree, the offset is lowered and the state
    accepted, no re-home (nothing restarted). Behind: time ran backwards, which only a restart explains."""
    checker = anchored()
    verdicts = []
    for seq in range(2, 2 + checker.chain.resync_states):
        t_s = seq * PERIOD_S + step_s
        verdicts.append(checker.check(state_msg(seq, START, t_s=t_s), seq * PERIOD_S + 1e-4, applied_units=0.0))
    *first, last = verdicts
    if step_s > 0:
        assert [v.kind for v in first] == [TIME_AHEAD] * (checker.chain.resync_states - 1)
        assert last.accepted and last.clock_corrected and not last.restart
        seq = 2 + checker.chain.resync_states  # the corrected offset judges the next state: on time
        assert checker.check(state_msg(seq, START, t_s=seq * PERIOD_S + step_s), seq * PERIOD_S + 1e-4, 0.0).accepted
    else:
        assert [v.kind for v in verdicts] == ["time_backwards"] * checker.chain.resync_states
        assert last.restart and not last.accepted


def test_the_velocity_bound_has_headroom_over_the_simulated_arm_at_full_commands() -> None:
    """The fastest honest motion: FetchReach driven by full +-1 commands (bang-bang, switching every 10 steps, and
    random full-scale). Its reported velocities must stay well inside the bound (half of it), or a real run would
    be stopped by its own arm."""
    import gymnasium as gym
    import gymnasium_robotics

    gym.register_envs(gymnasium_robotics)
    env = gym.make("FetchReach-v4")
    rng = np.random.default_rng(0)
    peak = 0.0
    try:
        for episode in range(8):
            env.reset(seed=episode)
            for t in range(50):
                if episode % 2:
                    action = np.sign(rng.uniform(-1.0, 1.0, 4))
                else:
                    action = np.zeros(4)
                    action[(t // 10) % 3] = 1.0 if (t // 5) % 2 else -1.0
                obs, *_ = env.step(action)
                peak = max(peak, float(np.abs(obs["observation"][VELOCITY : VELOCITY + 5]).max()))
    finally:
        env.close()
    assert 0.1 * VELOCITY_LIMIT < peak < 0.5 * VELOCITY_LIMIT
