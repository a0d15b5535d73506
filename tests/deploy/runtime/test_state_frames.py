"""malformed_state: CRC-valid STATE frames that cannot be a state of this robot, each with its reason."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from deploy.contract import fetch_reach_contract
from deploy.runtime.state_frames import (
    FLAGS,
    PENDING_DUPLICATE,
    PENDING_LENGTH,
    STATE_LENGTH,
    TIMESTAMP,
    malformed_state,
)
from deploy.wire import StateFlags, StateMsg

CONTRACT = fetch_reach_contract(2)
GOOD = StateMsg(7, 1.25, np.zeros(CONTRACT.state_dim), 0, (5, 6))
ACTIVE, FROM_ROBOT = int(StateFlags.ESTOP_ACTIVE), int(StateFlags.ESTOP_FROM_ROBOT)


@pytest.mark.parametrize(
    ("changes", "reason"),
    [
        ({"state": np.zeros(CONTRACT.state_dim - 1)}, STATE_LENGTH),
        ({"pending": (6,)}, PENDING_LENGTH),
        ({"pending": (6, 6)}, PENDING_DUPLICATE),
        ({"t_s": float("nan")}, TIMESTAMP),
        ({"t_s": -0.5}, TIMESTAMP),
        ({"flags": 1 << 6}, FLAGS),
        ({"flags": FROM_ROBOT}, FLAGS),  # where an active e-stop came from, without one being active
        ({"flags": FROM_ROBOT | int(StateFlags.HOLDING)}, FLAGS),
    ],
)
def test_a_state_that_cannot_be_this_robots_names_its_reason(changes, reason):
    assert malformed_state(dataclasses.replace(GOOD, **changes), CONTRACT) == reason


HOMED, HOLDING = int(StateFlags.HOMED), int(StateFlags.HOLDING)


@pytest.mark.parametrize("flags", [0, ACTIVE, ACTIVE | FROM_ROBOT, HOMED, HOLDING, ACTIVE | HOMED])
def test_consistent_flags_and_a_hold_in_the_line_are_well_formed(flags):
    assert malformed_state(dataclasses.replace(GOOD, flags=flags, pending=(0, 6)), CONTRACT) == ""
