"""The cell supervisor and the runtimes' partner links over loopback UDP: forwarding, stale and reordered reports
dropped, a runtime restart accepted, and a supervisor killed and restarted on the same port picked up again."""

from __future__ import annotations

import select
import signal
import subprocess
import time

import pytest

from deploy.cell.partner_link import PartnerLink
from deploy.cell.report import PositionReport
from deploy.cell.supervisor import CellSupervisor, main, spawn_supervisor

WAIT_S = 5.0  # longest wait for a datagram on loopback (a loaded machine); never reached when all is well
SILENCE_S = 0.3  # how long a report that must not come is waited for


def report(arm: int, seq: int, stamp: float) -> PositionReport:
    return PositionReport(arm, seq, stamp, True, (0.0, 0.0, 0.0), (0.1, 0.1, 0.1), (0.05, 0.05, 0.05), 0.04, 0.04)


def wait_for(link: PartnerLink, seq: int, wait_s: float = WAIT_S) -> PositionReport | None:
    """Poll ``link`` until the partner's report ``seq`` arrived (or ``wait_s`` passed)."""
    deadline = time.monotonic() + wait_s
    while (latest := link.poll()) is None or latest.seq < seq:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            return latest
        select.select([link.fileno()], [], [], remaining)
    return latest


class Clock:
    def __init__(self, t: float = 50.0) -> None:
        self.t = t

    def __call__(self) -> float:
        return self.t


def test_reports_are_forwarded_checked_and_counted() -> None:
    clock = Clock()
    supervisor = CellSupervisor(port=0, stale_s=0.12, clock=clock)
    links = [PartnerLink(arm, supervisor.address) for arm in (0, 1)]
    try:
        supervisor.handle(report(0, 1, 49.99).encode(), links[0].address)  # arm 1 unknown yet: kept, not forwarded
        assert supervisor.counts["reports_arm_0"] == 1 and not supervisor.counts["forwarded_to_arm_1"]
        supervisor.handle(report(1, 1, 49.995).encode(), links[1].address)  # forwarded to arm 0
        assert wait_for(links[0], 1).arm == 1
        supervisor.handle(report(0, 2, 49.998).encode(), links[0].address)  # now arm 1's address is known
        assert wait_for(links[1], 2).seq == 2
        supervisor.handle(report(0, 3, 49.8).encode(), links[0].address)  # 0.2 s old on arrival: stale, dropped
        supervisor.handle(report(0, 4, 49.997).encode(), links[0].address)  # older than seq 2's stamp: reordered
        supervisor.handle(b"garbage", links[0].address)
        assert supervisor.counts["stale_arm_0"] == 1
        assert supervisor.counts["old_arm_0"] == 1
        assert supervisor.counts["malformed"] == 1
        clock.t = 50.01
        supervisor.handle(report(0, 1, 50.005).encode(), links[0].address)  # numbering began again, later stamp
        assert supervisor.counts["restarts_arm_0"] == 1
        assert wait_for(links[1], 1).stamp_s == 50.005  # the partner link takes the restarted runtime's report
        assert links[1].counts["partner_restarts"] == 1
        assert supervisor.status()["arm_0_age_s"] == pytest.approx(0.005)
    finally:
        supervisor.stop()
        for link in links:
            link.close()


def test_the_partner_link_keeps_the_newest_and_ignores_its_own() -> None:
    receiver = PartnerLink(0, ("127.0.0.1", 9))
    sender = PartnerLink(1, receiver.address)  # sends straight to arm 0's link, as the supervisor would
    try:
        for seq, stamp in ((1, 10.0), (3, 10.2), (2, 10.1), (3, 10.2)):  # reordered, then repeated
            sender.send(report(1, seq, stamp))
        sender.send(report(0, 9, 11.0))  # arm 0's own report, returned: not the partner's
        assert wait_for(receiver, 3).seq == 3
        deadline = time.monotonic() + WAIT_S
        while receiver.counts["own_reports_returned"] < 1 and time.monotonic() < deadline:
            select.select([receiver.fileno()], [], [], 0.05)
            receiver.poll()
        assert receiver.latest.stamp_s == 10.2
        assert receiver.counts["old_or_repeated_reports"] == 2
        assert receiver.counts["own_reports_returned"] == 1
    finally:
        sender.close()
        receiver.close()


def _start_supervisor_process(port: int) -> subprocess.Popen:
    return spawn_supervisor(port)  # returns once bound and serving


def test_a_killed_supervisor_restarted_on_its_port_is_picked_up_again() -> None:
    probe = CellSupervisor(port=0)
    port = probe.address[1]
    probe.stop()
    links = [PartnerLink(arm, ("127.0.0.1", port)) for arm in (0, 1)]
    process = _start_supervisor_process(port)
    try:
        seq = 0

        def exchange(wait_s: float = WAIT_S) -> tuple[PositionReport | None, PositionReport | None]:
            nonlocal seq
            seq += 1
            for _ in range(2):  # the first report of each arm teaches the supervisor its address
                for arm in (0, 1):
                    links[arm].send(report(arm, seq, time.monotonic()))
            return wait_for(links[0], seq, wait_s), wait_for(links[1], seq, wait_s)

        assert all(r is not None and r.seq == 1 for r in exchange())
        process.send_signal(signal.SIGKILL)
        process.wait()
        silent = exchange(SILENCE_S)  # nobody forwards: the partners' newest reports are still seq 1
        assert [r.seq for r in silent] == [1, 1]
        process = _start_supervisor_process(port)  # knows nothing; learns both addresses from the next reports
        assert [r.seq for r in exchange()] == [3, 3]
    finally:
        process.kill()
        process.wait()
        for link in links:
            link.close()


def test_bad_arguments_exit_2() -> None:
    assert main(["--stale-s", "-1"]) == 2


def test_a_second_supervisor_on_a_served_port_is_refused_with_the_cause(capsys: pytest.CaptureFixture[str]) -> None:
    first = CellSupervisor(port=0)
    try:
        port = first.address[1]
        with pytest.raises(OSError, match="another supervisor .* holds the port"):
            CellSupervisor(port=port)
        assert main(["--port", str(port)]) == 2
        assert "holds the port" in capsys.readouterr().err
    finally:
        first.stop()
    CellSupervisor(port=port).stop()  # free again once its holder has gone
