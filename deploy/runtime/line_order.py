"""The order rules of a robot's reported delay line: what a serial link and a robot that applies its line oldest
first allow (``StateIntake`` refuses a state that breaks them: ``pending_order``, ``pending_not_fifo``).

stdlib only, robot side. Sequence numbers as the wire numbers them (``deploy.wire.seq_newer``: across the wrap);
holds the robot inserted itself (``HOLD_SEQ``, 0) are skipped.
"""

from __future__ import annotations

import itertools

from deploy.wire import HOLD_SEQ, seq_newer


def out_of_order(pending: tuple[int, ...]) -> bool:
    """Whether a reported delay line (oldest first) lists two of this loop's commands in another order than they
    were sent: each command in it must be newer than the one before it (holds, 0, are skipped)."""
    commands = [seq for seq in pending if seq != HOLD_SEQ]
    return any(not seq_newer(newer, older) for older, newer in itertools.pairwise(commands))


def not_fifo(old_pending: tuple[int, ...], new_pending: tuple[int, ...]) -> bool:
    """Whether a reported delay line cannot follow from the previous accepted one (``old_pending``) on a robot that
    applies its line oldest first. Commands reach the robot in the order they were sent (or are lost), so every
    command of the new line sent no later than the old line's newest must have been in the old line (else it was
    applied already, or never arrived), and the old line's commands still listed must be its newest ones (a command
    leaves from the front, never from the middle). Either broken shows the robot's bookkeeping of its line is wrong:
    the policy would be given an action history that is not the robot's, and the barrier would count moves already
    made or miss ones to come. Holds (0) are skipped; an old line of holds only bounds nothing."""
    old = [seq for seq in old_pending if seq != HOLD_SEQ]
    if not old:
        return False
    listed, newest = set(old), old[-1]
    if any(seq != HOLD_SEQ and seq not in listed and not seq_newer(seq, newest) for seq in new_pending):
        return True
    still = set(new_pending)
    kept = [seq in still for seq in old]
    return any(earlier and not later for earlier, later in itertools.pairwise(kept))
