"""``robot-grpo convert-logs``: old .tlog logs (formats 1 and 2, segments, damage) become MCAP tick logs that read
back record for record; errors are one line."""

from __future__ import annotations

import struct
import zlib
from pathlib import Path

import numpy as np
import pytest

from deploy.runtime.tick_record import TickRecord
from deploy.runtime.ticklog import scan_ticklog
from launch.cli import main
from launch.tlog_legacy import MAGIC, SYNC, read_legacy_log

ARRAYS = (("state", "<f8"), ("obs_flat", "<f4"), ("goal", "<f8"), ("proposed", "<f8"), ("sent", "<f8"))


def old_payload(r: TickRecord, version: int) -> bytes:
    """A record as the old writer packed it (layout in launch/tlog_legacy.py)."""
    parts = [struct.pack("<dqqqddB", r.t_s, r.tick, r.episode_id, r.state_seq, r.latency_s, r.jitter_s, r.stop)]
    for name, dtype in ARRAYS:
        values = np.asarray(getattr(r, name), dtype=dtype)
        parts += [struct.pack("<H", values.size), values.tobytes()]
    parts.append(bytes([len(r.reasons)]))
    for reason in r.reasons:
        parts += [bytes([len(reason.encode())]), reason.encode()]
    if version >= 2:
        parts += [bytes([len(r.policy_id)]), r.policy_id.encode()]
    return b"".join(parts)


def old_file(records: list[TickRecord], version: int = 2) -> bytes:
    head = struct.pack("<8sHH", MAGIC, version, 0)
    out = [head, struct.pack("<I", zlib.crc32(head))]
    for r in records:
        payload = old_payload(r, version)
        length = struct.pack("<I", len(payload))
        out += [SYNC, length, struct.pack("<I", zlib.crc32(payload, zlib.crc32(length))), payload]
    return b"".join(out)


def record(i: int) -> TickRecord:
    rng = np.random.default_rng(i)
    return TickRecord(
        0.04 * i, i, rng.normal(size=10), rng.normal(size=24).astype(np.float32), rng.normal(size=3),
        rng.normal(size=4), rng.normal(size=4), ("clip",) if i % 2 else (), 1e-4 * i, -1e-5, i // 5, 100 + i,
        i == 7, "a" * 64,
    )  # fmt: skip


def test_an_old_log_with_segments_converts_record_for_record(tmp_path: Path, capsys) -> None:
    records = [record(i) for i in range(12)]
    (tmp_path / "ticks.tlog").write_bytes(old_file(records[:8]))
    (tmp_path / "ticks.tlog.1").write_bytes(old_file(records[8:]))
    assert main(["convert-logs", str(tmp_path / "ticks.tlog")]) == 0
    assert "ticks.tlog -> " in capsys.readouterr().out
    scan = scan_ticklog(tmp_path / "ticks.mcap")
    assert len(scan.records) == 12 and scan.corrupt_records == 0
    for a, b in zip(records, scan.records, strict=True):
        assert (a.tick, a.reasons, a.episode_id, a.state_seq, a.stop, a.policy_id, a.t_s) == (
            b.tick, b.reasons, b.episode_id, b.state_seq, b.stop, b.policy_id, b.t_s
        )  # fmt: skip
        for name, _ in ARRAYS:
            assert (
                np.array_equal(getattr(a, name), getattr(b, name)) and getattr(b, name).dtype == getattr(a, name).dtype
            )
    assert scan.metadata["converted_from"]["files"] == "ticks.tlog, ticks.tlog.1"
    assert (tmp_path / "ticks.tlog").is_file()  # the old files stay
    # a converted log has no run metadata (no box, no position slice): the report still reads it
    assert main(["report", str(tmp_path / "ticks.mcap"), "--out", str(tmp_path / "report")]) == 0
    assert "Converted from an old log: ticks.tlog, ticks.tlog.1" in (tmp_path / "report" / "report.md").read_text()


def test_a_folder_of_version_1_and_damaged_logs_converts_what_was_readable(tmp_path: Path, capsys) -> None:
    (tmp_path / "a.tlog").write_bytes(old_file([record(i) for i in range(4)], version=1))
    damaged = bytearray(old_file([record(i) for i in range(5)]))
    damaged[-10] ^= 0xFF  # the last record's payload: bad CRC
    (tmp_path / "b.tlog").write_bytes(bytes(damaged))
    assert main(["convert-logs", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "b.tlog -> " in out and "skipped 1 damaged record" in out
    assert [r.policy_id for r in scan_ticklog(tmp_path / "a.mcap").records] == [""] * 4
    assert len(scan_ticklog(tmp_path / "b.mcap").records) == 4
    assert read_legacy_log(tmp_path / "b.tlog").corrupt_records == 1


@pytest.mark.parametrize(
    ("make", "match"),
    [
        (lambda p: p / "nope.tlog", "nope.tlog"),
        (lambda p: (p / "x.txt").write_text("x") and p / "x.txt", "not an old tick log"),
        (lambda p: (p / "bad.tlog").write_bytes(b"hello, not a log") and p / "bad.tlog", "not an old tick log"),
    ],
)
def test_bad_input_is_one_line_with_exit_2(tmp_path: Path, capsys, make, match) -> None:
    assert main(["convert-logs", str(make(tmp_path))]) == 2
    err = capsys.readouterr().err
    assert match in err and err.count("\n") == 1


def test_an_existing_mcap_is_never_overwritten(tmp_path: Path, capsys) -> None:
    (tmp_path / "ticks.tlog").write_bytes(old_file([record(0)]))
    (tmp_path / "ticks.mcap").write_bytes(b"keep me")
    assert main(["convert-logs", str(tmp_path / "ticks.tlog")]) == 2
    assert "exists" in capsys.readouterr().err and (tmp_path / "ticks.mcap").read_bytes() == b"keep me"
