"""Frames that decode but cannot be a state of this robot: rejected right after decoding, with a counted reason.

numpy only (robot side). The wire decoder checks framing, CRC, version and payload syntax; it does not know the
robot. A CRC-valid STATE can still be malformed for this contract: a state vector of the wrong length, a delay line
shorter than the policy's history (the policy would expect commands the robot already applied) or longer than any
robot's, a command listed twice in the line, a timestamp that is not a finite, non-negative number of seconds, flag
bits this protocol does not define, or ESTOP_FROM_ROBOT without ESTOP_ACTIVE (the bit says where an active e-stop
came from; alone, the loop would wait on an e-stop the robot does not report as active, without sending one).
``RobotLink`` drops such frames before the loop sees them and counts them as ``malformed_<reason>``; nothing raises.
"""

from __future__ import annotations

import math

from deploy.contract import MAX_DELAY_STEPS, ObservationContract
from deploy.wire import HOLD_SEQ, StateFlags, StateMsg

STATE_LENGTH = "state_length"
PENDING_LENGTH = "pending_length"
PENDING_DUPLICATE = "pending_duplicate"
TIMESTAMP = "timestamp"
FLAGS = "flags"
MALFORMED_REASONS = (STATE_LENGTH, PENDING_LENGTH, PENDING_DUPLICATE, TIMESTAMP, FLAGS)
KNOWN_FLAGS = int(StateFlags.ESTOP_ACTIVE | StateFlags.HOLDING | StateFlags.ESTOP_FROM_ROBOT | StateFlags.HOMED)


def malformed_state(msg: StateMsg, contract: ObservationContract) -> str:
    """The reason ``msg`` cannot be a state of a robot running ``contract`` ("" when it can)."""
    if msg.state.shape != (contract.state_dim,):
        return STATE_LENGTH
    n = len(msg.pending)
    if n and not contract.history_len <= n <= MAX_DELAY_STEPS:
        return PENDING_LENGTH
    commands = [s for s in msg.pending if s != HOLD_SEQ]
    if len(set(commands)) != len(commands):
        return PENDING_DUPLICATE
    if not (math.isfinite(msg.t_s) and msg.t_s >= 0.0):
        return TIMESTAMP
    if msg.flags & ~KNOWN_FLAGS:
        return FLAGS
    if msg.flags & StateFlags.ESTOP_FROM_ROBOT and not msg.flags & StateFlags.ESTOP_ACTIVE:
        return FLAGS  # the robot-side bit says where an active e-stop came from; alone it contradicts itself
    return ""
