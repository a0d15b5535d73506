"""UnreportedFollowing: whether the arm follows its commands, reckoned from what was sent and the spec's delay, for a
robot that reports no delay line. A lock-step robot of the spec's delay (2 steps) and nominal gain, simulated here."""

from __future__ import annotations

import numpy as np

from deploy.contract import fetch_reach_contract
from deploy.robot_spec import load_robot_spec
from deploy.runtime.unreported_following import UnreportedFollowing

SPEC = load_robot_spec()
CONTRACT = fetch_reach_contract(2)
GAIN_M = np.asarray(SPEC.actuator_gain) * SPEC.command_scale_m  # metres per command unit, per axis
DELAY = SPEC.delay_steps
FULL_MINUS_Y = [0.0, -1.0, 0.0, 0.0]


def drive(check: UnreportedFollowing, commands: list[list[float]], frozen_from: int | None = None) -> list[bool]:
    """Send each command, then show the state after the robot's step (commands applied ``DELAY`` steps late); the
    sensor repeats its reading from step ``frozen_from`` on. Returns each state's verdict (True: not following)."""
    position = np.array([1.3, 0.75, 0.6])
    reading = position.copy()
    sent: list[list[float]] = []
    verdicts = [check.not_following(reading.tolist())]
    for step, command in enumerate(commands):
        check.sent(command)
        sent.append(command)
        if len(sent) > DELAY:
            position = position + np.asarray(sent[-1 - DELAY][:3]) * GAIN_M
        if frozen_from is None or step < frozen_from:
            reading = position.copy()
        verdicts.append(check.not_following(reading.tolist()))
    return verdicts


def test_an_arm_that_follows_is_never_judged_short():
    check = UnreportedFollowing(SPEC, CONTRACT, noise_m=0.0)
    pattern = [FULL_MINUS_Y] * 5 + [[0.0, 1.0, 0.5, 0.0]] * 3 + [[1.0, -1.0, 0.0, 0.0], [-1.0, 1.0, 0.0, 0.0]] * 4
    assert not any(drive(check, pattern))


def test_a_sensor_frozen_while_the_policy_drives_on_is_caught_within_five_steps():
    check = UnreportedFollowing(SPEC, CONTRACT, noise_m=0.0)
    verdicts = drive(check, [FULL_MINUS_Y] * 12, frozen_from=4)
    caught = verdicts.index(True) - 1  # the step whose state was judged short
    assert 4 < caught <= 4 + 5


def test_small_commands_are_not_judged():
    check = UnreportedFollowing(SPEC, CONTRACT, noise_m=0.0)
    assert not any(drive(check, [[0.0, -0.05, 0.0, 0.0]] * 12, frozen_from=0))


def test_commands_sent_before_a_reset_are_never_judged():
    """A HOME drops the commands the robot had not applied: the arm does not follow them, and must not be asked to."""
    check = UnreportedFollowing(SPEC, CONTRACT, noise_m=0.0)
    for _ in range(6):
        check.sent(FULL_MINUS_Y)
    check.reset()
    still = [1.3, 0.75, 0.6]
    assert not any(check.not_following(still) for _ in range(8))
