"""A runtime's partner link alone, over loopback UDP: a poll that finds nothing is cheap and quiet, several waiting
reports leave the newest, the link's own and malformed datagrams are dropped and counted, and a supervisor that is
gone is silence (an unconnected UDP socket hears no ICMP error on Linux): no report, no exception; and a flood on
the port cannot hold a poll (it reads a bounded number, the rest at the next polls)."""

from __future__ import annotations

import socket
import time

from deploy.cell.partner_link import MAX_DATAGRAMS_PER_POLL, PartnerLink
from deploy.cell.report import PositionReport

WAIT_S = 5.0  # longest wait for loopback delivery on a loaded machine; never reached when all is well


def report(arm: int, seq: int, stamp: float) -> PositionReport:
    return PositionReport(arm, seq, stamp, True, (0.0, 0.0, 0.0), (0.1, 0.1, 0.1), (0.05, 0.05, 0.05), 0.04, 0.04)


def poll_until(link: PartnerLink, done) -> None:
    deadline = time.monotonic() + WAIT_S
    while not done() and time.monotonic() < deadline:
        link.poll()
        time.sleep(0.001)


def test_nothing_waiting_returns_the_kept_report() -> None:
    link = PartnerLink(0, ("127.0.0.1", 9))
    try:
        assert link.poll() is None and link.poll() is None
        assert not link.counts  # nothing read, nothing counted
    finally:
        link.close()


def test_the_newest_of_several_waiting_reports_is_kept_and_the_rest_counted() -> None:
    link = PartnerLink(0, ("127.0.0.1", 9))
    sender = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        for datagram in (
            report(1, 1, 10.0).encode(),
            report(1, 3, 10.2).encode(),
            report(1, 2, 10.1).encode(),  # older stamp than seq 3's: dropped
            report(0, 9, 10.3).encode(),  # this arm's own report, returned
            b"not a report",
        ):
            sender.sendto(datagram, link.address)
        poll_until(link, lambda: sum(link.counts.values()) >= 5)
        assert link.latest is not None and link.latest.seq == 3
        assert link.counts["partner_reports"] == 2
        assert link.counts["old_or_repeated_reports"] == 1
        assert link.counts["own_reports_returned"] == 1
        assert link.counts["malformed_reports"] == 1
    finally:
        sender.close()
        link.close()


def test_a_supervisor_that_is_gone_is_silence_and_the_poll_returns() -> None:
    gone = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    gone.bind(("127.0.0.1", 0))
    address = gone.getsockname()
    gone.close()  # nobody listens there now
    link = PartnerLink(0, address)
    try:
        for seq in (1, 2):
            link.send(report(0, seq, 10.0 + seq))
            time.sleep(0.01)  # time for any ICMP answer to come back
            assert link.poll() is None  # no report, no exception: the partner's report ages (the barrier holds)
        assert link.counts["reports_sent"] == 2 and not link.counts["partner_reports"]
    finally:
        link.close()


def test_a_flood_is_read_a_bounded_number_at_a_time() -> None:
    link = PartnerLink(0, ("127.0.0.1", 9))
    sender = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    flood = 5 * MAX_DATAGRAMS_PER_POLL
    try:
        for seq in range(1, flood + 1):
            sender.sendto(report(1, seq, 10.0 + seq).encode(), link.address)
        deadline = time.monotonic() + WAIT_S
        while not link._ready.poll(0) and time.monotonic() < deadline:  # the first datagram is in
            time.sleep(0.001)
        time.sleep(0.05)  # and the rest of the burst (loopback delivers at once)
        assert link.poll().seq == MAX_DATAGRAMS_PER_POLL  # one poll read its share and returned
        assert link.counts["polls_cut_short"] == 1
        polls = 1
        while link.latest.seq < flood and polls < flood:
            link.poll()
            polls += 1
        assert link.latest.seq == flood and polls == 5  # the next polls read on, in order
        assert link.counts["partner_reports"] == flood
    finally:
        sender.close()
        link.close()
