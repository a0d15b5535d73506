"""The commands in flight between the loop and the robot: the policy's action history and the barrier's input.

The robot applies each command ``k`` control steps late. Its STATE frames report the sequence numbers of the
commands still in its delay line (oldest first; 0 = a hold it inserted itself). From those and a table of the
commands it sent, the loop rebuilds

- the policy's action history (the newest ``history_len`` commands in the line: what the simulator shows a policy
  trained with that history, even when the robot's delay has since grown), and
- the displacement still to come (every command in the line, plus those sent but not yet reported), which the
  safety filter's workspace barrier adds to the current position.

A robot that does not report its line (empty ``pending``) falls back to the commands the loop sent.

An entry of the line is one of three kinds: a hold (``HOLD_SEQ``), a command in the table of sent commands, or
neither. Of the last, one older than the oldest command remembered may be a command sent long ago and forgotten, or
one a robot kept from before this loop's first command (``unknown_pending``: a hold in the history, the largest
move in the barrier); one as new as a remembered command or newer was never sent as a command by this loop
(``unsent``): the robot's numbering is wrong, and the loop treats the state as implausible (it never plans with it).
``acked_seq`` only ever moves to a command that was sent.
numpy only (robot side).
"""

from __future__ import annotations

import math
from collections import Counter, OrderedDict
from typing import NamedTuple

import numpy as np

from deploy.contract import ActionHistory, ObservationContract
from deploy.wire import HOLD_SEQ, seq_newer


class SentCommand(NamedTuple):
    """One command the loop sent: the command (units, float64), when (seconds, the loop's clock) and the Euclidean
    length of its move (command units, the first ``position_dims`` components)."""

    command: np.ndarray
    t_s: float
    length: float


MIN_SENT_CAPACITY = 64  # commands remembered for matching the robot's reported line
# The arm may still owe the motion of the newest command it reports applied (the simulated Fetch's y axis lags its
# target by one control step): the barrier counts that command as still to come.
UNREPORTED_APPLIED_EXTRA = 2  # without a reported line: commands beyond the delay that one state may reflect


LinesKey = tuple[tuple[int, ...], tuple[int, ...], int | None]  # two states' lines and the newest command sent before


def newest_listed(pending: tuple[int, ...]) -> int | None:
    """The newest command (sequence number) a reported delay line lists; None for a line of holds only (or none)."""
    return next((seq for seq in reversed(pending) if seq != HOLD_SEQ), None)


class CommandLine:
    """Sent commands, the robot's reported delay line, the policy's history and the displacement in flight.

    :param contract: the policy's contract (history length, action size, metres per unit).
    :param delay_steps: commands in flight to assume when the robot does not report its line (control steps).
    :param counts: the loop's counters (``unknown_pending``, ``line_longer_than_history`` are added here).
    :param position_dims: how many leading action components are a Cartesian move (default: the goal's size).
    """

    def __init__(
        self, contract: ObservationContract, delay_steps: int, counts: Counter[str], position_dims: int | None = None
    ) -> None:
        self.contract = contract
        self.position_dims = contract.goal_dim if position_dims is None else position_dims
        self.delay_steps = delay_steps
        self.counts = counts
        self.history = ActionHistory(contract.history_len, contract.action_dim)
        self._hold = contract.hold()
        self._in_flight = np.zeros((0, contract.action_dim))
        self._line_seqs: tuple[int, ...] = ()  # the reported line's sequence numbers (oldest first)
        self._sent: OrderedDict[int, SentCommand] = OrderedDict()  # seq -> what was sent, in sending order
        bound = max(abs(contract.action_low), abs(contract.action_high))
        self._unknown_length = 2.0 * bound * math.sqrt(self.position_dims)  # a forgotten command, both ways
        self._timed_seq: int | None = None  # the newest command whose round trip was measured
        self._capacity = max(MIN_SENT_CAPACITY, 4 * contract.history_len)
        self.acked_seq = 0  # newest command the robot reported in its delay line
        self._in_flight_rows: np.ndarray | None = None  # in_flight() as built since the last change (None: stale)
        self._in_flight_moves: list[list[float]] | None = None  # in_flight_moves(), likewise
        self._owed_move: list[float] | None = None  # the newest command applied (its move): the arm may still owe it
        self._maybe_applied_memo: tuple[LinesKey, list[int]] | None = None  # its last question, answer (since a send)

    def new_episode(self) -> None:
        """The robot went home: nothing is in flight and the history is all holds."""
        self._changed()
        self.history.clear()
        self._in_flight = self._in_flight[:0]
        self._owed_move = None
        self._line_seqs = ()

    def round_trip_s(self, pending: tuple[int, ...], t_in: float) -> float | None:
        """Seconds from sending the newest command in ``pending`` to receiving the state that first reports it
        (None when there is no new one): the link's round trip, including the robot's wait for its next step."""
        newest = newest_listed(pending)
        if newest is None or newest not in self._sent:
            return None
        if self._timed_seq is not None and not seq_newer(newest, self._timed_seq):
            return None
        self._timed_seq = newest
        return t_in - self._sent[newest].t_s

    def unsent(self, pending: tuple[int, ...]) -> int:
        """How many entries of a reported delay line name a command this loop never sent: not a hold, not in the
        table of sent commands, and not older than its oldest entry (so not one sent and forgotten, nor one the
        robot kept from before this loop's first command). Zero before the first command."""
        sent_table = self._sent
        oldest = next(iter(sent_table), None)
        if oldest is None:
            return 0
        return sum(1 for seq in pending if seq != HOLD_SEQ and seq not in sent_table and not seq_newer(oldest, seq))

    @property
    def last_sent_seq(self) -> int | None:
        """Sequence number of the newest command sent (None before the first)."""
        return next(reversed(self._sent), None)

    def sent(self, seq: int, command: np.ndarray, robot_reports_line: bool, t_sent: float = 0.0) -> None:
        """Remember a command just sent (float64) and when (seconds); without a reported line it enters the history
        at once."""
        self._changed()
        self._maybe_applied_memo = None
        self._sent[seq] = SentCommand(command, t_sent, math.hypot(*command[: self.position_dims].tolist()))
        if len(self._sent) > self._capacity:
            self._sent.popitem(last=False)
        if not robot_reports_line:
            self.history.push(command)
            self.acked_seq = seq

    def sync(self, pending: tuple[int, ...]) -> None:
        """Set the history from the robot's reported delay line (sequence numbers, oldest first).

        A line longer than the policy's history (the robot's delay grew since training) is accepted; a shorter
        one must have been refused at decode (``deploy.runtime.state_frames``): the policy would expect commands in
        its history that the robot has already applied. A line naming a command never sent (``unsent``) must have
        been refused by the loop's check; an entry not remembered (``unknown_pending``) becomes a hold, and
        ``acked_seq`` only moves to a command that was sent.
        """
        if not pending:
            return  # the robot does not report its line: keep the history of what was sent
        self._changed()
        history_len = self.contract.history_len
        if len(pending) < history_len:
            raise ValueError(
                f"the robot reports {len(pending)} commands in flight; the policy was trained with a history of "
                f"{history_len}. Recalibrate the delay or use a package trained for this robot"
            )
        commands = []
        for seq in pending:
            sent = self._sent.get(seq) if seq != HOLD_SEQ else None
            if sent is None:
                if seq != HOLD_SEQ:
                    self.counts["unknown_pending"] += 1
                commands.append(self._hold)
                continue
            commands.append(sent.command)
            if seq_newer(seq, self.acked_seq):
                self.acked_seq = seq
        rows = np.array(commands)  # one call, not one per row: a tick starts cold, and each numpy call costs then
        if len(pending) > history_len:
            self.counts["line_longer_than_history"] += 1
        left = [seq for seq in self._line_seqs if seq not in pending and seq in self._sent]
        if left:  # the newest command that left the line was applied last
            self._owed_move = self._sent[left[-1]].command[: self.position_dims].tolist()
        self._line_seqs = pending
        self._in_flight = rows
        self.history.set_state(rows[len(rows) - history_len :])

    def in_flight(self) -> np.ndarray:
        """``[n, action_dim]`` commands still to be applied: the reported line (or, without one, the last
        ``delay_steps`` sent) plus those sent but not yet reported. Built once per change; do not write to it."""
        if self._in_flight_rows is None:
            self._in_flight_rows = self._build_in_flight()
        return self._in_flight_rows

    def _build_in_flight(self) -> np.ndarray:
        if len(self._in_flight):
            line = self._in_flight
        elif self.delay_steps:
            line = self.history.get_state()[-self.delay_steps :]
        else:
            line = self._in_flight
        unreported = self._sent_after(self.acked_seq)
        return np.vstack([line, *(self._sent[seq].command for seq in unreported)]) if unreported else line

    def _sent_after(self, seq: int | None) -> list[int]:
        """Sequence numbers of the commands sent after ``seq`` (all remembered ones for None), newest first. The
        table is in sending order, so this walks back from the newest: a tick looks at a few entries, not all."""
        out = []
        for sent in reversed(self._sent):
            if seq is not None and not seq_newer(sent, seq):
                break
            out.append(sent)
        return out

    def in_flight_moves(self) -> list[list[float]]:
        """``in_flight``'s moves (the first ``position_dims`` components, command units) as Python floats, for the
        tick's pure-Python planners. Built once per change; do not write to it."""
        if self._in_flight_moves is None:
            dims = self.position_dims
            self._in_flight_moves = [row[:dims] for row in self.in_flight().tolist()]
        return self._in_flight_moves

    def displacement_m(self) -> list[float]:
        """Metres (first ``position_dims`` axes) the gripper will still move at nominal gain from the commands in
        flight and the newest applied (the arm may lag it a step); on floats: numpy's calls cost more, cold."""
        moves = self.in_flight_moves()
        if self._owed_move is not None:
            moves = [self._owed_move, *moves]
        scale = self.contract.action_scale_m
        if not moves:
            return [0.0] * self.position_dims
        return [sum(axis) * scale for axis in zip(*moves, strict=True)]

    def _changed(self) -> None:
        """What the commands in flight are built from changed: build them anew when next asked."""
        self._in_flight_rows = None
        self._in_flight_moves = None

    def applied_for_sure(self, old_pending: tuple[int, ...], new_pending: tuple[int, ...]) -> list[list[float]] | None:
        """The moves (command units, the first ``position_dims`` components), oldest first, of the commands that were
        certainly applied between two states with these reported lines: those the old line listed and the new one no
        longer does (a line is applied from the front, ``line_order.not_fifo``). A command sent after the old state and
        absent from the new line may have been lost on the link, so it is not listed. None when there is nothing to go
        by: no reported lines, or a command that left the line is one this loop no longer remembers."""
        if not (old_pending and new_pending):
            return None
        still = set(new_pending)
        moves = []
        for seq in old_pending:
            if seq == HOLD_SEQ or seq in still:
                continue
            sent = self._sent.get(seq)
            if sent is None:
                return None
            moves.append(sent.command[: self.position_dims].tolist())
        return moves

    def applied_moves(
        self, old_pending: tuple[int, ...], new_pending: tuple[int, ...], sent_after: int | None
    ) -> list[tuple[int, list[float] | None]]:
        """The commands that may have been applied between two states, oldest first, as (sequence number, move in
        command units of the first ``position_dims`` components; None for a command this loop no longer remembers):
        the set ``applied_length`` sums (``_maybe_applied``). Without reported lines, the commands sent after
        ``sent_after``."""
        sent_table = self._sent
        dims = self.position_dims
        if not (old_pending or new_pending):
            return [(seq, sent_table[seq].command[:dims].tolist()) for seq in reversed(self._sent_after(sent_after))]
        moves: list[tuple[int, list[float] | None]] = []
        for seq in self._maybe_applied(old_pending, new_pending, sent_after):
            sent = sent_table.get(seq)
            moves.append((seq, None if sent is None else sent.command[:dims].tolist()))
        return moves

    def _maybe_applied(
        self, old_pending: tuple[int, ...], new_pending: tuple[int, ...], sent_after: int | None
    ) -> list[int]:
        """Sequence numbers, oldest first, of the commands that may have been applied between two states with these
        reported lines: those in the old line or sent after ``sent_after`` (the newest command the robot had when the
        old state was made; None: none) that the new line no longer lists, and no newer than the newest command it
        lists. A line is applied from the front (``line_order.not_fifo``), so a command newer than every command the new
        line lists had not reached the robot when it made that state; counted now, it would enter the reckoning before
        the older commands it follows and the reckoned path would run the wrong way. A new line of holds only bounds
        nothing: every command sent after ``sent_after`` may have come and gone. Kept until the next send: a state's
        check asks twice (``applied_length``, ``applied_moves``)."""
        key = (old_pending, new_pending, sent_after)
        if self._maybe_applied_memo is not None and self._maybe_applied_memo[0] == key:
            return self._maybe_applied_memo[1]
        still = set(new_pending)
        newest = newest_listed(new_pending)
        candidates = dict.fromkeys([*old_pending, *reversed(self._sent_after(sent_after))])
        seqs = [
            seq
            for seq in candidates
            if seq != HOLD_SEQ and seq not in still and (newest is None or not seq_newer(seq, newest))
        ]
        self._maybe_applied_memo = (key, seqs)
        return seqs

    @property
    def largest_command(self) -> float:
        """The largest command component the contract allows (command units): a forgotten command's move per axis."""
        return max(abs(self.contract.action_low), abs(self.contract.action_high))

    def applied_length(
        self, old_pending: tuple[int, ...], new_pending: tuple[int, ...], sent_after: int | None
    ) -> float:
        """Summed Euclidean length (command units, the first ``position_dims`` components) of the commands that may
        have been applied between two states with these reported lines (``_maybe_applied``). A command this loop no
        longer remembers counts as the largest possible, both ways. Without reported lines, any of the last
        ``delay_steps + UNREPORTED_APPLIED_EXTRA`` commands sent may have been applied. The lengths were taken when
        the commands were sent, so this is a few additions per state."""
        sent_table = self._sent
        if not (old_pending or new_pending):
            recent = list(sent_table.values())[-(self.delay_steps + UNREPORTED_APPLIED_EXTRA) :]
            return sum(sent.length for sent in recent)
        total = 0.0
        for seq in self._maybe_applied(old_pending, new_pending, sent_after):
            sent = sent_table.get(seq)
            total += self._unknown_length if sent is None else sent.length
        return total
