"""A runtime's end of the cell supervisor's loopback link: send its own position report, keep the partner's newest.

stdlib only (robot side). One UDP socket bound to an ephemeral loopback port; nothing blocks: ``send`` drops a report
the kernel will not take (counted), ``poll`` reads what has arrived and returns the partner's newest report. A
report is newer than the one kept when its stamp is later (a partner that restarted numbers from 1 again: a lower
sequence number with a later stamp is a restart, counted); an older or repeated one is dropped and counted, a
malformed one too. The supervisor being gone shows as silence (an unconnected UDP socket hears no ICMP error on
Linux; a send the kernel refuses is counted): the partner's report then ages until the separation barrier holds the
arm (``deploy.runtime.separation``).
"""

from __future__ import annotations

import select
import socket
from collections import Counter

from deploy.cell.report import PositionReport, ReportError, decode_report

MAX_DATAGRAM = 2048
# datagrams one poll reads at most: a partner sends one report per control period, so more than a few waiting is a
# backlog or a flood on the port, and a poll that read them all would hold the tick; the rest wait for the next poll
# (the report kept meanwhile is older, which the barrier plans with at its true, larger age)
MAX_DATAGRAMS_PER_POLL = 8
LOOPBACK = "127.0.0.1"


class PartnerLink:
    """UDP link of arm ``arm``'s runtime to the supervisor at ``supervisor`` (host, port).

    :param arm: this runtime's arm (0 or 1); reports from any other arm are the partner's.
    :param supervisor: the supervisor's (host, port).
    :param bind_host: the local address to send from (loopback).
    """

    def __init__(self, arm: int, supervisor: tuple[str, int], bind_host: str = LOOPBACK) -> None:
        self.arm = int(arm)
        self.supervisor = (str(supervisor[0]), int(supervisor[1]))
        self.counts: Counter[str] = Counter()
        self.latest: PositionReport | None = None  # the partner's newest valid report
        self._sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self._sock.bind((bind_host, 0))
        self._sock.setblocking(False)
        self._ready = select.poll()  # readable (a datagram, or a pending error to clear) without a failed recv
        self._ready.register(self._sock, select.POLLIN)

    @property
    def address(self) -> tuple[str, int]:
        return self._sock.getsockname()

    def fileno(self) -> int:
        """The socket's descriptor (to wait on it with ``select``)."""
        return self._sock.fileno()

    def send(self, report: PositionReport) -> None:
        """Send this arm's report to the supervisor (never blocks, never raises on a missing supervisor)."""
        try:
            self._sock.sendto(report.encode(), self.supervisor)
            self.counts["reports_sent"] += 1
        except OSError:  # refused (no supervisor), buffer full: the partner sees this arm's report age
            self.counts["send_failures"] += 1

    def poll(self) -> PositionReport | None:
        """Read the datagrams that arrived (at most ``MAX_DATAGRAMS_PER_POLL``; more left waiting are counted); the
        partner's newest valid report (None before the first). Asks the socket whether anything is waiting first:
        most polls find nothing, and a failed ``recv`` costs an exception on every tick."""
        for _ in range(MAX_DATAGRAMS_PER_POLL):
            if not self._ready.poll(0):
                return self.latest
            try:
                data = self._sock.recv(MAX_DATAGRAM)
            except BlockingIOError:  # readable, yet nothing to take (a datagram dropped for a bad checksum)
                return self.latest
            except OSError:  # ICMP port unreachable from an earlier send: the supervisor is gone
                self.counts["supervisor_unreachable"] += 1
                continue
            self._take(data)
        if self._ready.poll(0):
            self.counts["polls_cut_short"] += 1  # a backlog or a flood: read on at the next poll
        return self.latest

    def _take(self, data: bytes) -> None:
        try:
            report = decode_report(data)
        except ReportError:
            self.counts["malformed_reports"] += 1
            return
        if report.arm == self.arm:
            self.counts["own_reports_returned"] += 1
            return
        latest = self.latest
        if latest is not None and report.stamp_s <= latest.stamp_s:
            self.counts["old_or_repeated_reports"] += 1
            return
        if latest is not None and report.seq <= latest.seq:
            self.counts["partner_restarts"] += 1
        self.counts["partner_reports"] += 1
        self.latest = report

    def close(self) -> None:
        self._sock.close()
