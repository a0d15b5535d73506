"""The position report datagram: a round trip keeps every field; a short, corrupt, foreign or absurd one is refused."""

from __future__ import annotations

import struct
import zlib

import pytest

from deploy.cell.report import REPORT_SIZE, PositionReport, ReportError, decode_report

REPORT = PositionReport(1, 7, 123.25, True, (1.0, 0.5, 0.4), (1.1, 0.6, 0.5), (1.05, 0.55, 0.45), 0.04, 0.04, 12)


def test_round_trip() -> None:
    data = REPORT.encode()
    assert len(data) == REPORT_SIZE
    assert decode_report(data) == REPORT
    assert REPORT.age_s(123.5) == pytest.approx(0.25)


@pytest.mark.parametrize(
    "mangle",
    [
        lambda d: d[:-1],  # short
        lambda d: d[:10] + bytes([d[10] ^ 0x01]) + d[11:],  # one bit flipped: CRC
    ],
)
def test_a_damaged_datagram_is_refused(mangle) -> None:
    with pytest.raises(ReportError):
        decode_report(mangle(REPORT.encode()))


def _sealed(body: bytes) -> bytes:
    return body + struct.pack("<I", zlib.crc32(body))


@pytest.mark.parametrize(
    "report",
    [
        PositionReport(1, 7, 1.0, True, (1.0, 0.5, 0.4), (0.9, 0.6, 0.5), (1.0, 0.5, 0.4), 0.04, 0.04),  # low > high
        PositionReport(1, 7, float("nan"), True, (0, 0, 0), (0, 0, 0), (0, 0, 0), 0.04, 0.04),  # NaN stamp
        PositionReport(1, 7, 1.0, True, (0, 0, 0), (0, 0, 0), (0, 0, 0), 0.04, 0.0),  # no period
    ],
)
def test_a_sealed_but_absurd_report_is_refused(report: PositionReport) -> None:
    with pytest.raises(ReportError):
        decode_report(report.encode())


def test_a_foreign_magic_with_a_valid_crc_is_refused() -> None:
    body = REPORT.encode()[:-4]
    with pytest.raises(ReportError, match="magic"):
        decode_report(_sealed(b"ABCD" + body[4:]))
