"""The controller's end of the wire link: opens and reopens the port, numbers messages, never raises mid-run.

A failed send or receive marks the link down (counted, logged once) instead of raising, so the loop keeps its
deadline and its safety logic; while the link is down, sends are counted as unsent and a receive just waits out
its timeout. A port we opened by name is reopened every ``reconnect_interval_s``; a ``Link`` we were handed is
simply tried again; ``generation`` counts the reopenings (the loop restarts its state checks on a new one).

States that decode but cannot belong to the robot (``deploy.runtime.state_frames``) are dropped here and counted
as ``malformed_<reason>``. The robot numbers every message it sends from one counter, so a message whose number does
not follow the previous one's came after a loss (a corrupted frame, counted as ``robot_frame_gaps``): a round trip
timed on it includes the wait for a later answer, not just the link (``arrived_after_loss``).
"""

from __future__ import annotations

import logging
import time
from collections import Counter, deque
from collections.abc import Callable

from deploy.contract import ObservationContract
from deploy.runtime.state_frames import malformed_state
from deploy.wire import DEFAULT_BAUDRATE, Link, LinkError, Message, StateMsg, seq_after

logger = logging.getLogger(__name__)

AFTER_LOSS_MEMORY = 16  # numbers of recent robot messages that came after a loss (a tick looks at the newest few)


class RobotLink:
    """Link state of one controller run.

    :param port: a port name / pyserial URL (opened by :meth:`open`, reopened after a failure, closed by
        :meth:`close`) or an open ``Link`` (never closed here: its owner closes it).
    :param counts: the controller's counters; adds ``unsent``, ``link_errors``, ``reconnects`` and
        ``robot_frame_gaps``.
    :param reconnect_interval_s: seconds between attempts to reopen a named port.
    :param clock: monotonic clock in seconds.
    :param contract: when given, states malformed for it are dropped and counted.
    :param baudrate: line rate of a named port, bit/s, at every (re)open (ptys and sockets ignore it).
    :param sleep: how a poll on a down link waits out its timeout (seconds, on ``clock``'s time base).
    """

    def __init__(
        self,
        port: str | Link,
        counts: Counter[str],
        reconnect_interval_s: float,
        clock: Callable[[], float] = time.monotonic,
        contract: ObservationContract | None = None,
        baudrate: int = DEFAULT_BAUDRATE,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self._port = port if isinstance(port, str) else None
        self._baudrate = int(baudrate)
        self.link: Link | None = None if isinstance(port, str) else port
        self.ok = True
        self.counts = counts
        self.reconnect_interval_s = reconnect_interval_s
        self._clock = clock
        self._sleep = sleep
        self._seq = 0
        self.sent_total = 0  # messages sent or attempted (a running count; the state checker bounds answers by it)
        self._last_reconnect = float("-inf")
        self._contract = contract
        self.generation = 0
        self.rejected: list[str] = []  # malformed-state reasons since the loop last took them (take_rejected)
        self._last_robot_seq: int | None = None
        self._after_loss: deque[int] = deque(maxlen=AFTER_LOSS_MEMORY)

    @property
    def name(self) -> str:
        """The port's name (for messages)."""
        return self.link.name if self.link is not None else str(self._port)

    @property
    def is_open(self) -> bool:
        return self.link is not None

    def open(self) -> None:
        """Open a named port (a LinkError names it if it cannot be opened); a given Link is already open."""
        if self.link is None:
            self.link = Link(self._port, baudrate=self._baudrate)

    def close(self) -> None:
        """Close a port we opened; a Link we were given stays open."""
        if self._port is not None and self.link is not None:
            self.link.close()

    def next_seq(self) -> int:
        """The next message sequence number (1..SEQ_MAX, wrapping to 1: ``deploy.wire.seq_after``)."""
        self._seq = seq_after(self._seq)
        return self._seq

    def send(self, msg: Message) -> None:
        """Send one message; on a dead link count it as unsent (a failure marks the link down)."""
        self.sent_total += 1
        if not self.ok or self.link is None:
            self.counts["unsent"] += 1
            return
        try:
            self.link.send(msg)
        except LinkError as err:
            self._failed(err)

    def poll(self, timeout_s: float) -> list[Message]:
        """Messages that arrive within ``timeout_s`` seconds; a down link waits out the timeout and returns none."""
        if not self.ok or self.link is None:
            self._sleep(max(0.0, timeout_s))  # wait for the deadline, then the next tick tries to reopen the port
            return []
        try:
            messages = self.link.poll(timeout_s)
        except LinkError as err:
            self._failed(err)
            return []
        for msg in messages:
            self._note_seq(msg.seq)
        if self._contract is None:
            return messages
        kept = []
        for msg in messages:
            reason = malformed_state(msg, self._contract) if isinstance(msg, StateMsg) else ""
            if reason:
                self.counts[f"malformed_{reason}"] += 1
                self.rejected.append(reason)
            else:
                kept.append(msg)
        return kept

    def _note_seq(self, seq: int) -> None:
        last = self._last_robot_seq
        if last is not None and seq not in (last, seq_after(last)):  # a repeat (a frozen sender) loses no frame
            self.counts["robot_frame_gaps"] += 1
            self._after_loss.append(seq)
        self._last_robot_seq = seq

    def arrived_after_loss(self, seq: int) -> bool:
        """Whether the robot message numbered ``seq`` (one of the last few received) followed a lost message."""
        return seq in self._after_loss

    def take_rejected(self) -> list[str]:
        """The malformed-state reasons seen since the last call (the loop holds and logs them)."""
        rejected, self.rejected = self.rejected, []
        return rejected

    def reconnect_if_due(self) -> None:
        """After a failure: reopen a named port (at most every ``reconnect_interval_s``) or retry a given Link."""
        if self.ok:
            return
        if self._port is None:
            self.ok = True  # a Link we were given: try it again
            self.generation += 1
            return
        now = self._clock()
        if now - self._last_reconnect < self.reconnect_interval_s:
            return
        self._last_reconnect = now
        if self.link is not None:
            self.link.close()
            self.link = None
        try:
            self.link = Link(self._port, baudrate=self._baudrate)
        except LinkError as err:
            logger.warning("reconnect to %s failed: %s", self._port, err)
            return
        self.counts["reconnects"] += 1
        self.generation += 1
        self.ok = True

    def decoder_errors(self) -> dict[str, int]:
        """Frames the decoder dropped, by reason (empty before the port is open)."""
        return dict(self.link.decoder.errors) if self.link is not None else {}

    def _failed(self, err: LinkError) -> None:
        self.counts["link_errors"] += 1
        if self.ok:
            logger.error("link %s failed: %s", self.name, err)
        self.ok = False
