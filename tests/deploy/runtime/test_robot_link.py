"""RobotLink: sequence numbers wrap, a failing port marks the link down without raising, reopening is paced."""

from collections import Counter

import pytest

from deploy.runtime.robot_link import RobotLink
from deploy.wire import SEQ_MAX, HeartbeatMsg, Link, LinkError


class FlakyTransport:
    """An in-memory byte pipe whose reads and writes raise LinkError while ``broken`` is set."""

    def __init__(self) -> None:
        self.broken = False
        self.written = bytearray()
        self.closed = False

    def read(self, timeout_s: float) -> bytes:
        if self.broken:
            raise LinkError("cable pulled")
        return bytes(self.written)  # echo: what we sent comes back

    def write(self, data: bytes) -> int:
        if self.broken:
            raise LinkError("cable pulled")
        self.written += data
        return len(data)

    def close(self) -> None:
        self.closed = True


class Clock:
    def __init__(self) -> None:
        self.t = 0.0

    def __call__(self) -> float:
        return self.t


def test_sequence_numbers_start_at_one_and_wrap_past_the_uint32_limit():
    link = RobotLink("loop://", Counter(), reconnect_interval_s=1.0)
    assert [link.next_seq(), link.next_seq()] == [1, 2]
    link._seq = SEQ_MAX - 1
    assert [link.next_seq(), link.next_seq()] == [SEQ_MAX, 1]  # 0 is never used


def test_a_failing_given_link_is_counted_not_raised_then_retried():
    transport = FlakyTransport()
    given = Link.from_transport(transport, "flaky")
    counts: Counter[str] = Counter()
    link = RobotLink(given, counts, reconnect_interval_s=1.0)
    link.open()  # already open: nothing happens
    link.send(HeartbeatMsg(link.next_seq(), 0.0))
    assert [type(m) for m in link.poll(0.0)] == [HeartbeatMsg]

    transport.broken = True
    link.send(HeartbeatMsg(link.next_seq(), 0.0))  # fails: the link goes down
    assert not link.ok and counts["link_errors"] == 1
    link.send(HeartbeatMsg(link.next_seq(), 0.0))  # while down: not attempted, counted
    assert counts["unsent"] == 1
    assert link.poll(0.0) == []

    transport.broken = False
    link.reconnect_if_due()  # a given Link is simply tried again
    assert link.ok and counts["reconnects"] == 0
    link.close()
    assert not transport.closed  # its owner closes it


def test_a_named_port_is_reopened_at_most_every_interval():
    clock = Clock()
    counts: Counter[str] = Counter()
    link = RobotLink("loop://", counts, reconnect_interval_s=0.5, clock=clock)
    link.open()
    first = link.link
    link._failed(LinkError("port vanished"))
    link.reconnect_if_due()  # the first attempt is immediate
    assert link.ok and counts["reconnects"] == 1 and link.link is not first and first.closed

    link._failed(LinkError("port vanished again"))
    clock.t = 0.2
    link.reconnect_if_due()  # too soon after the last attempt
    assert not link.ok and counts["reconnects"] == 1
    clock.t = 0.6
    link.reconnect_if_due()
    assert link.ok and counts["reconnects"] == 2
    link.close()
    assert link.link.closed


def test_a_port_that_cannot_be_reopened_stays_down():
    clock = Clock()
    link = RobotLink("/dev/does-not-exist-robot-grpo", Counter(), reconnect_interval_s=0.5, clock=clock)
    with pytest.raises(LinkError, match="does-not-exist"):
        link.open()
    link._failed(LinkError("never opened"))
    link.reconnect_if_due()
    assert not link.ok and link.decoder_errors() == {}


class QueueTransport:
    """An in-memory pipe: each read returns what was written since the last read."""

    def __init__(self) -> None:
        self.buffer = bytearray()

    def read(self, timeout_s: float) -> bytes:
        data, self.buffer = bytes(self.buffer), bytearray()
        return data

    def write(self, data: bytes) -> int:
        self.buffer += data
        return len(data)

    def close(self) -> None:
        pass


def test_a_message_whose_number_skips_one_is_marked_as_after_a_loss():
    """The robot numbers all its messages from one counter: 5 after 3 means 4 was lost (a corrupted frame), so a
    round trip timed on 5 would include the wait for a later answer."""
    transport = QueueTransport()
    counts: Counter[str] = Counter()
    link = RobotLink(Link.from_transport(transport, "queue"), counts, reconnect_interval_s=1.0)
    sender = Link.from_transport(transport, "queue")
    for seq in (1, 2, 3, 5, 6, SEQ_MAX, 1):
        sender.send(HeartbeatMsg(seq, 0.0))
    assert [m.seq for m in link.poll(0.0)] == [1, 2, 3, 5, 6, SEQ_MAX, 1]
    assert [seq for seq in (1, 2, 3, 5, 6, SEQ_MAX) if link.arrived_after_loss(seq)] == [5, SEQ_MAX]
    assert not link.arrived_after_loss(1)  # the number wrapped: SEQ_MAX then 1 is no loss
    assert counts["robot_frame_gaps"] == 2


def test_a_named_port_opens_and_reopens_at_the_given_baud_rate():
    """A USB serial adapter needs its line rate set: the launch file's robot.baudrate reaches every (re)open."""
    clock = Clock()
    link = RobotLink("loop://", Counter(), reconnect_interval_s=1.0, clock=clock, baudrate=115_200)
    link.open()
    assert link.link.transport.port.baudrate == 115_200
    link._failed(LinkError("cable pulled"))
    clock.t = 2.0
    link.reconnect_if_due()
    assert link.ok and link.link.transport.port.baudrate == 115_200
    link.close()


def test_a_robot_that_wraps_as_the_protocol_says_costs_no_gap_and_no_round_trip_sample():
    """PROTOCOL.md: after 2^32 - 1 comes 1 (0 is never a message's number), the same rule as our own numbering."""
    transport = QueueTransport()
    counts: Counter[str] = Counter()
    link = RobotLink(Link.from_transport(transport, "queue"), counts, reconnect_interval_s=1.0)
    sender = Link.from_transport(transport, "queue")
    robot_seqs = [SEQ_MAX - 2, SEQ_MAX - 1, SEQ_MAX, 1, 2, 3]
    for seq in robot_seqs:
        sender.send(HeartbeatMsg(seq, 0.0))
    assert [m.seq for m in link.poll(0.0)] == robot_seqs
    assert counts["robot_frame_gaps"] == 0
    assert not any(link.arrived_after_loss(seq) for seq in robot_seqs)
    link._seq = SEQ_MAX - 3  # ours follows the same rule (the last number it used)
    assert [link.next_seq() for _ in robot_seqs] == robot_seqs


def test_a_robot_that_wraps_through_zero_is_off_protocol_and_counted():
    transport = QueueTransport()
    counts: Counter[str] = Counter()
    link = RobotLink(Link.from_transport(transport, "queue"), counts, reconnect_interval_s=1.0)
    sender = Link.from_transport(transport, "queue")
    for seq in (SEQ_MAX - 1, SEQ_MAX, 0, 1):
        sender.send(HeartbeatMsg(seq, 0.0))
    link.poll(0.0)
    assert counts["robot_frame_gaps"] == 1 and link.arrived_after_loss(0)
