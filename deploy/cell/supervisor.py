"""The cell supervisor: gathers each arm's position report over loopback UDP and passes it on to the partner.

stdlib only (robot side). Small on purpose: it decides nothing about motion (each runtime's separation barrier does,
from the partner's report and its age), so its failure is the partner's report going stale, which holds both arms.

Per datagram from arm ``i`` (``deploy.cell.report``): a malformed one is dropped and counted; a report whose stamp is
not later than arm ``i``'s newest is dropped (old, repeated or reordered); one older than ``stale_s`` on arrival
is dropped too (stale detection: forwarding it would only tell the partner what it must ignore). A later stamp with
a sequence number that did not go up is a runtime restart (counted, accepted). The sender's address is learnt from
every accepted report (a restarted runtime has a new one), and the report is sent at once to the partner's address,
unchanged. A restarted supervisor knows nothing: it learns both addresses from the next report of each arm, within
one control period.

Run it on the runtimes' host:

    python -m deploy.cell.supervisor --port 29100 --stale-s 0.12 [--realtime-priority 50]

(``spawn_supervisor`` starts it so from Python and returns once it serves.) On a real cell it runs at the runtimes'
SCHED_FIFO priority: a report it forwards late is a partner that goes stale, and a stale partner holds the arm.
"""

from __future__ import annotations

import argparse
import logging
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass

from deploy.cell.layout import ARMS
from deploy.cell.partner_link import LOOPBACK, MAX_DATAGRAM
from deploy.cell.report import PositionReport, ReportError, decode_report
from deploy.runtime.realtime import enter_realtime
from deploy.runtime.separation import DEFAULT_STALE_S

logger = logging.getLogger(__name__)

# Below Linux's ephemeral range (32768-60999, net.ipv4.ip_local_port_range): a port in it can be taken at any moment
# by some process's outgoing socket, and the supervisor then cannot start (a benchmark run lost its last case to
# "Address already in use" on 47311; what held the port was gone before it could be looked up)
DEFAULT_PORT = 29100
POLL_S = 0.01  # longest wait for a datagram, so stop() acts promptly (seconds)
SERVING = "cell supervisor on"  # the first line the supervisor prints once it serves


class SupervisorStartError(RuntimeError):
    """The supervisor process did not come up (its port held, a priority refused); the message says why."""


@dataclass
class ArmRecord:
    """What the supervisor knows of one arm: its newest report, where it came from and when it arrived."""

    report: PositionReport
    address: tuple[str, int]
    received_s: float


class CellSupervisor:
    """The supervisor (module docstring). ``start()`` serves on a thread; ``serve(stop)`` on the caller's.

    :param port: UDP port to serve on (0: any free one, see ``address``).
    :param host: address to bind (loopback).
    :param stale_s: a report older than this on arrival (seconds, the host's monotonic clock) is dropped.
    :param clock: the host's monotonic clock (seconds); the runtimes stamp on the same one.
    """

    def __init__(
        self,
        port: int = DEFAULT_PORT,
        host: str = LOOPBACK,
        stale_s: float = DEFAULT_STALE_S,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if not stale_s > 0:
            raise ValueError(f"stale_s must be > 0 seconds, got {stale_s}")
        self.stale_s = float(stale_s)
        self._clock = clock
        self.counts: Counter[str] = Counter()
        self.arms: dict[int, ArmRecord] = {}
        # no SO_REUSEADDR: on Linux it lets a second UDP socket share the port, so a stale supervisor and a new one
        # would split the arms' reports between them. A UDP port is free again the moment its holder dies, so a
        # restarted supervisor binds at once without it.
        self._sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        try:
            self._sock.bind((host, port))
        except OSError as err:
            self._sock.close()
            raise OSError(
                err.errno,
                f"cannot serve the cell on {host}:{port} ({err.strerror}): another supervisor (or a stale one from an "
                "earlier run) holds the port; stop it or pick another --port",
            ) from err
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    @property
    def address(self) -> tuple[str, int]:
        return self._sock.getsockname()

    # Lifecycle ---------------------------------------------------------------------------------------------------
    def start(self) -> CellSupervisor:
        """Serve on a background thread; returns self."""
        if self._thread is not None:
            raise RuntimeError("the supervisor is already serving")
        self._thread = threading.Thread(target=self.serve, args=(self._stop,), name="cell-supervisor", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop serving and close the socket (idempotent)."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
            self._thread = None
        self._sock.close()

    def serve(self, stop: threading.Event) -> None:
        """Handle datagrams until ``stop`` is set."""
        self._sock.settimeout(POLL_S)
        while not stop.is_set():
            try:
                data, sender = self._sock.recvfrom(MAX_DATAGRAM)
            except TimeoutError:
                continue
            except OSError:  # ICMP unreachable from a forward to a runtime that is gone
                self.counts["forward_failures"] += 1
                continue
            self.handle(data, sender)

    # One datagram ------------------------------------------------------------------------------------------------
    def handle(self, data: bytes, sender: tuple[str, int]) -> PositionReport | None:
        """Check one datagram, keep and forward it; the accepted report (None when dropped)."""
        try:
            report = decode_report(data)
        except ReportError:
            self.counts["malformed"] += 1
            return None
        now = self._clock()
        if report.age_s(now) > self.stale_s:
            self.counts[f"stale_arm_{report.arm}"] += 1
            return None
        known = self.arms.get(report.arm)
        if known is not None and report.stamp_s <= known.report.stamp_s:
            self.counts[f"old_arm_{report.arm}"] += 1
            return None
        if known is not None and report.seq <= known.report.seq:
            self.counts[f"restarts_arm_{report.arm}"] += 1
        self.arms[report.arm] = ArmRecord(report, sender, now)
        self.counts[f"reports_arm_{report.arm}"] += 1
        partner = self.arms.get(1 - report.arm)
        if partner is not None:
            try:
                self._sock.sendto(data, partner.address)
                self.counts[f"forwarded_to_arm_{partner.report.arm}"] += 1
            except OSError:
                self.counts["forward_failures"] += 1
        return report

    def status(self) -> dict[str, float | None]:
        """Per arm, the age of its newest report (seconds; None: none yet); above ``stale_s`` it is stale."""
        now = self._clock()
        return {f"arm_{arm}_age_s": (now - r.report.stamp_s if (r := self.arms.get(arm)) else None) for arm in ARMS}


def spawn_supervisor(
    port: int, stale_s: float = DEFAULT_STALE_S, realtime_priority: int | None = None, **popen: object
) -> subprocess.Popen:
    """The supervisor in its own interpreter (``python -m deploy.cell.supervisor``) on loopback ``port``; returns
    once it serves. Raises ``SupervisorStartError`` with the supervisor's own error when it did not start (a stale
    supervisor holding the port would otherwise serve in its place). ``popen``: more ``subprocess.Popen`` arguments
    (``cwd``, ``env``)."""
    args = [sys.executable, "-m", "deploy.cell.supervisor", "--port", str(port), "--stale-s", str(stale_s)]
    if realtime_priority is not None:
        args += ["--realtime-priority", str(realtime_priority)]
    with tempfile.TemporaryFile(mode="w+") as errors:  # a file, not a pipe: nobody reads it while it serves
        process = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=errors, text=True, **popen)  # type: ignore[call-overload]
        line = process.stdout.readline()  # type: ignore[union-attr]
        if line.startswith(SERVING):
            return process
        process.kill()
        process.wait()
        errors.seek(0)
        raise SupervisorStartError(
            f"the cell supervisor did not start on port {port}: {errors.read().strip() or line.strip() or 'no output'}"
        )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="cell supervisor: shares the arms' position reports (loopback UDP)")
    parser.add_argument("--port", type=int, default=DEFAULT_PORT, help="UDP port on loopback")
    parser.add_argument("--stale-s", type=float, default=DEFAULT_STALE_S, help="drop reports older than this (s)")
    parser.add_argument(
        "--realtime-priority", type=int, default=None, help="serve under SCHED_FIFO at this priority (1-99; Linux)"
    )
    args = parser.parse_args(argv)
    try:
        supervisor = CellSupervisor(args.port, stale_s=args.stale_s)
    except (ValueError, OSError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    try:
        restore_scheduler = enter_realtime(args.realtime_priority)
    except (ValueError, OSError) as err:  # refused (no CAP_SYS_NICE) or out of range
        supervisor.stop()
        print(f"error: {err}", file=sys.stderr)
        return 2
    print(f"{SERVING} {supervisor.address[0]}:{supervisor.address[1]}", flush=True)
    stop = threading.Event()
    try:
        supervisor.serve(stop)
    except KeyboardInterrupt:
        pass
    finally:
        supervisor.stop()
        restore_scheduler()
    return 0


if __name__ == "__main__":
    sys.exit(main())
