"""The position report an arm's runtime shares with its partner through the cell supervisor (one UDP datagram).

numpy-free, robot side. Sent after every command the runtime sends; the supervisor passes it on to the partner
unchanged. Fields (cell frame, metres, seconds):

- ``arm``: who sends it (0 or 1); ``seq``: the sender's report number (u32, +1 per report, starts at 1 each run);
- ``stamp_s``: when the sender made it, on the host's monotonic clock (``time.monotonic``: CLOCK_MONOTONIC is one
  clock for every process of a host; the runtimes and the supervisor of a cell share a host and talk over
  loopback). The partner's age of a report is ``now - stamp_s``;
- ``known``: False when the sender does not know where its arm is (before its first accepted state, after a safe
  stop): the partner then holds, as for a stale report;
- ``low``/``high``: the sender's *reach*: a box that holds its gripper from ``stamp_s`` on for as long as it sends no
  further command (its position bound, which contains the true gripper under the spec's gain range and noise,
  grown by every command in flight at the spec's gain upper bound);
- ``position``: its newest checked (accepted) gripper position: what a cell policy reads as the partner;
- ``step_m``: how far one further command can grow the reach on an axis (metres; gain upper bound x command scale
  x largest command, widened by the coupling share); ``period_s``: its control period (one command per period);
- ``episodes_ended``: how many episodes the sender has ended (served or aborted) this run: an arm waiting to begin
  its episode n has ended n, and so has one in the middle of it. A cell whose arms start their episodes together
  (``SeparationConfig.start_together``) homes an arm for its episode n only once its partner has ended n too.

Layout: little-endian ``struct``, a magic, a version and a CRC-32 of everything before it: a datagram that is short,
foreign or corrupt is refused (``ReportError``), never half-read.
"""

from __future__ import annotations

import math
import struct
import zlib
from dataclasses import dataclass

MAGIC = b"CELR"
REPORT_VERSION = 2  # 2: episodes_ended
_BODY = struct.Struct("<4sBBBxIIdd3d3d3dd")
_CRC = struct.Struct("<I")
REPORT_SIZE = _BODY.size + _CRC.size
SEQ_MODULO = 2**32


class ReportError(ValueError):
    """A datagram that is not a valid position report."""


@dataclass(frozen=True)
class PositionReport:
    """One arm's shared position (see the module docstring for the fields and units)."""

    arm: int
    seq: int
    stamp_s: float
    known: bool
    low: tuple[float, float, float]
    high: tuple[float, float, float]
    position: tuple[float, float, float]
    step_m: float
    period_s: float
    episodes_ended: int = 0

    def encode(self) -> bytes:
        body = _BODY.pack(
            MAGIC,
            REPORT_VERSION,
            self.arm,
            int(self.known),
            self.seq % SEQ_MODULO,
            self.episodes_ended % SEQ_MODULO,
            self.stamp_s,
            self.step_m,
            *self.low,
            *self.high,
            *self.position,
            self.period_s,
        )
        return body + _CRC.pack(zlib.crc32(body))

    def age_s(self, now_s: float) -> float:
        """Seconds since the report was made (``now_s`` on the same monotonic clock)."""
        return now_s - self.stamp_s


def decode_report(data: bytes) -> PositionReport:
    """Parse one datagram; ``ReportError`` names what is wrong with it."""
    if len(data) != REPORT_SIZE:
        raise ReportError(f"a position report has {REPORT_SIZE} bytes, got {len(data)}")
    body, (crc,) = data[: _BODY.size], _CRC.unpack(data[_BODY.size :])
    if zlib.crc32(body) != crc:
        raise ReportError("position report CRC mismatch")
    magic, version, arm, known, seq, ended, stamp, step, *values = _BODY.unpack(body)
    if magic != MAGIC:
        raise ReportError(f"not a position report (magic {magic!r})")
    if version != REPORT_VERSION:
        raise ReportError(f"position report version {version}; this build reads {REPORT_VERSION}")
    low, high, position, period = values[0:3], values[3:6], values[6:9], values[9]
    numbers = (stamp, step, period, *low, *high, *position)
    if not all(map(math.isfinite, numbers)) or arm > 1 or known > 1 or step < 0 or period <= 0:
        raise ReportError("position report with a non-finite or out-of-range field")
    if known and any(lo > hi for lo, hi in zip(low, high, strict=True)):
        raise ReportError("position report whose reach box has low > high")
    return PositionReport(arm, seq, stamp, bool(known), tuple(low), tuple(high), tuple(position), step, period, ended)
