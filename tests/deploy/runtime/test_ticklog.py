"""The tick log: round trip, torn tails at every byte, corrupt middle records, rotation, fsync, episodes."""

from __future__ import annotations

import os
import struct
import threading
import zlib

import numpy as np
import pytest

from deploy.runtime import ticklog
from deploy.runtime.tick_record import MAX_POLICY_ID_BYTES, NO_EPISODE, TickRecord
from deploy.runtime.ticklog import (
    MAGIC,
    SYNC,
    TickLogWriter,
    frame_record,
    read_ticklog,
    scan_ticklog,
    split_episodes,
    stack_field,
    ticklog_files,
)

POLICY_IDS = ("a" * 64, "", "0123456789abcdef" * 4)  # manifest digests, and a tick no policy was asked on


def make_record(i: int, episode: int = 0, reasons: tuple[str, ...] = ("clip",)) -> TickRecord:
    rng = np.random.default_rng(i)
    return TickRecord(
        t_s=0.04 * i,
        tick=i,
        state=rng.normal(size=10),
        obs_flat=rng.normal(size=24).astype(np.float32),
        goal=rng.normal(size=3),
        proposed=rng.normal(size=4),
        sent=rng.normal(size=4),
        reasons=reasons,
        latency_s=1e-4 * i,
        jitter_s=-1e-5 * i,
        episode_id=episode,
        state_seq=1000 + i,
        stop=i % 7 == 3,
        policy_id=POLICY_IDS[i % len(POLICY_IDS)],
    )


def same(a: TickRecord, b: TickRecord) -> bool:
    scalars = ("t_s", "tick", "reasons", "latency_s", "jitter_s", "episode_id", "state_seq", "stop", "policy_id")
    arrays = ("state", "obs_flat", "goal", "proposed", "sent")
    return all(getattr(a, n) == getattr(b, n) for n in scalars) and all(
        np.array_equal(getattr(a, n), getattr(b, n)) and getattr(a, n).dtype == getattr(b, n).dtype for n in arrays
    )


def write(path, records, **kwargs):
    with TickLogWriter(path, fsync_interval_s=None, **kwargs) as writer:
        for r in records:
            writer.append(r)
    return writer


def test_round_trip_bit_exact(tmp_path):
    records = [make_record(i, reasons=("clip", "workspace_barrier") if i % 2 else ()) for i in range(20)]
    records.append(make_record(20, reasons=("ünïcode",)))
    write(tmp_path / "ticks.tlog", records)
    back = read_ticklog(tmp_path / "ticks.tlog")
    assert len(back) == len(records)
    assert all(same(a, b) for a, b in zip(records, back, strict=True))
    assert back[3].obs_flat.dtype == np.float32 and back[3].state.dtype == np.float64
    assert (tmp_path / "ticks.tlog").read_bytes().startswith(MAGIC)


def test_truncating_the_last_record_at_every_byte_keeps_the_earlier_ones(tmp_path):
    path = tmp_path / "ticks.tlog"
    records = [make_record(i) for i in range(5)]
    write(path, records)
    data = path.read_bytes()
    last_start = data.rindex(SYNC)  # the fixture's payloads hold no SYNC bytes (checked here)
    assert data.count(SYNC) == len(records)
    for cut in range(last_start, len(data)):
        path.write_bytes(data[:cut])
        scan = scan_ticklog(path)
        assert len(scan.records) == 4, cut
        assert all(same(a, b) for a, b in zip(records[:4], scan.records, strict=True))
        assert scan.corrupt_records == 0, cut
        assert scan.torn_tails == (1 if cut > last_start else 0), cut
        assert scan.damage_at == ([4] if cut > last_start else []), cut  # a torn tail is damage after the last
    path.write_bytes(data)
    assert len(read_ticklog(path)) == 5


def test_a_file_cut_inside_its_header_reads_as_empty(tmp_path):
    path = tmp_path / "ticks.tlog"
    write(path, [make_record(0)])
    data = path.read_bytes()
    for cut in (0, 3, len(MAGIC), 15):
        path.write_bytes(data[:cut])
        assert scan_ticklog(path).records == []


@pytest.mark.parametrize("where", ["payload", "crc", "length", "sync"])
def test_a_corrupted_middle_record_is_skipped_and_counted(tmp_path, where):
    path = tmp_path / "ticks.tlog"
    records = [make_record(i) for i in range(6)]
    write(path, records)
    data = bytearray(path.read_bytes())
    starts = [i for i in range(len(data)) if data.startswith(SYNC, i)]
    offset = {"sync": 1, "length": 5, "crc": 9, "payload": 40}[where]
    data[starts[2] + offset] ^= 0xFF  # damage record 2
    path.write_bytes(bytes(data))
    scan = scan_ticklog(path)
    assert [r.tick for r in scan.records] == [0, 1, 3, 4, 5]
    assert scan.corrupt_records == 1
    assert scan.torn_tails == 0
    assert scan.skipped_bytes == starts[3] - starts[2]
    assert scan.damage_at == [2]  # the first record read after the skipped stretch (tick 3) is scan.records[2]


def test_garbage_between_records_is_skipped(tmp_path):
    path = tmp_path / "ticks.tlog"
    write(path, [make_record(0), make_record(1)])
    data = path.read_bytes()
    second = data.rindex(SYNC)
    path.write_bytes(data[:second] + b"\x00garbage" + SYNC[:2] + data[second:])
    scan = scan_ticklog(path)
    assert [r.tick for r in scan.records] == [0, 1]
    assert scan.corrupt_records == 1


def test_not_a_tick_log_and_a_future_version_are_refused(tmp_path):
    other = tmp_path / "other.tlog"
    other.write_bytes(b"hello world, not a log at all")
    with pytest.raises(ValueError, match="not a tick log"):
        read_ticklog(other)
    path = tmp_path / "ticks.tlog"
    write(path, [make_record(0)])
    data = bytearray(path.read_bytes())
    data[len(MAGIC)] = 9  # version 9, header CRC now wrong
    path.write_bytes(bytes(data))
    with pytest.raises(ValueError, match="header is corrupt"):
        read_ticklog(path)
    with pytest.raises(FileNotFoundError, match="no tick log"):
        read_ticklog(tmp_path / "missing.tlog")


def file_header(version: int) -> bytes:
    """A tick log file header of ``version`` with a valid CRC (what an older or newer build writes)."""
    head = struct.pack("<8sHH", MAGIC, version, 0)
    return head + struct.pack("<I", zlib.crc32(head))


def test_a_future_version_with_a_valid_header_is_refused_naming_the_versions_read(tmp_path):
    path = tmp_path / "ticks.tlog"
    path.write_bytes(file_header(3) + frame_record(make_record(0).encode()))
    with pytest.raises(ValueError, match=r"format version 3; this build reads \(1, 2\)"):
        read_ticklog(path)


def test_a_version_1_log_reads_with_no_policy_id(tmp_path):
    """A version 1 record is a version 2 one without the trailing policy id (written by the previous build)."""
    records = [make_record(i) for i in range(4)]
    v1_payloads = []
    for r in records:
        payload = r.encode()
        v1_payloads.append(payload[: len(payload) - 1 - len(r.policy_id)])
    path = tmp_path / "old.tlog"
    path.write_bytes(file_header(1) + b"".join(frame_record(p) for p in v1_payloads))
    scan = scan_ticklog(path)
    assert scan.corrupt_records == 0 and len(scan.records) == 4
    assert [r.policy_id for r in scan.records] == ["", "", "", ""]
    assert [r.tick for r in scan.records] == [0, 1, 2, 3]
    # the same bytes read as version 2 are short by the id's length byte: refused, not misread
    with pytest.raises(ValueError, match="malformed"):
        TickRecord.decode(v1_payloads[0], version=2)


@pytest.mark.parametrize("bad", ["ü" * 3, "a\nb", "x" * (MAX_POLICY_ID_BYTES + 1)])
def test_a_policy_id_the_format_cannot_hold_is_refused_on_write(tmp_path, bad):
    record = make_record(0)
    record.policy_id = bad
    with pytest.raises(ValueError, match="printable ASCII"):
        record.encode()


def test_a_crc_valid_record_whose_policy_id_is_not_printable_is_skipped(tmp_path):
    good = make_record(0)
    payload = bytearray(good.encode())
    payload[-1] = 0x07  # the id's last character: BEL (the length is unchanged, the CRC is recomputed)
    path = tmp_path / "ticks.tlog"
    path.write_bytes(file_header(2) + frame_record(bytes(payload)) + frame_record(make_record(1).encode()))
    scan = scan_ticklog(path)
    assert [r.tick for r in scan.records] == [1]
    assert scan.corrupt_records == 1


def test_rotation_by_size_keeps_order_and_every_record(tmp_path):
    path = tmp_path / "ticks.tlog"
    records = [make_record(i) for i in range(30)]
    one = len(ticklog.frame_record(records[0].encode()))
    writer = write(path, records, max_bytes=16 + 4 * one)  # header + 4 records per segment
    assert len(writer.segments) == 8  # ceil(30 / 4)
    assert all(p.stat().st_size <= 16 + 4 * one for p in writer.segments)
    assert ticklog_files(path) == writer.segments
    assert [r.tick for r in read_ticklog(path)] == list(range(30))
    # a second writer on the same log starts a new segment after the last one and never appends to old ones
    sizes = [p.stat().st_size for p in writer.segments]
    write(path, [make_record(30)], max_bytes=16 + 4 * one)
    assert [p.stat().st_size for p in writer.segments] == sizes
    assert [r.tick for r in read_ticklog(path)] == list(range(31))
    # a folder reads every log in it
    write(tmp_path / "another.tlog", [make_record(99)])
    assert sorted(r.tick for r in read_ticklog(tmp_path)) == [*range(31), 99]


def test_a_record_larger_than_max_bytes_still_gets_its_own_segment(tmp_path):
    path = tmp_path / "ticks.tlog"
    writer = write(path, [make_record(0), make_record(1)], max_bytes=20)
    assert len(writer.segments) == 2
    assert [r.tick for r in read_ticklog(path)] == [0, 1]


def test_fsync_inline_every_record(tmp_path, monkeypatch):
    calls = []
    real = os.fsync
    monkeypatch.setattr(ticklog.os, "fsync", lambda fd: (calls.append(fd), real(fd)))
    with TickLogWriter(tmp_path / "t.tlog", fsync_interval_s=0) as writer:
        for i in range(5):
            writer.append(make_record(i))
        assert writer.fsync_count == 5
    assert len(calls) >= 5


def test_fsync_runs_in_the_background_thread(tmp_path, monkeypatch):
    synced_from = []
    done = threading.Event()
    real = os.fsync

    def spy(fd):
        synced_from.append(threading.current_thread().name)
        done.set()
        return real(fd)

    monkeypatch.setattr(ticklog.os, "fsync", spy)
    writer = TickLogWriter(tmp_path / "t.tlog", fsync_interval_s=0.001)
    writer.append(make_record(0))
    assert done.wait(timeout=10.0)  # returns as soon as the thread has synced
    writer.close()
    assert "ticklog-fsync" in synced_from
    with pytest.raises(ValueError, match="closed"):
        writer.append(make_record(1))


def test_bad_writer_arguments(tmp_path):
    with pytest.raises(ValueError, match="fsync_interval_s"):
        TickLogWriter(tmp_path / "t.tlog", fsync_interval_s=-1)
    with pytest.raises(ValueError, match="max_bytes"):
        TickLogWriter(tmp_path / "t.tlog", max_bytes=8)


def test_split_episodes_by_id():
    ids = [NO_EPISODE, 0, 0, 0, NO_EPISODE, 1, 1, 2, 2, 2, 2, NO_EPISODE]
    records = [make_record(i, episode=e) for i, e in enumerate(ids)]
    episodes = split_episodes(records)
    assert [[r.tick for r in ep] for ep in episodes] == [[1, 2, 3], [5, 6], [7, 8, 9, 10]]
    assert [len(ep) for ep in split_episodes(records, min_length=3)] == [3, 4]
    assert stack_field(episodes[0], "sent").shape == (3, 4)
    with pytest.raises(ValueError, match="not an array field"):
        stack_field(episodes[0], "tick")


def test_split_episodes_when_a_new_run_reuses_the_episode_id():
    first_run = [make_record(i, episode=0) for i in range(3)]
    second_run = [make_record(i, episode=0) for i in range(2)]  # ticks restart at 0, same id
    assert [len(ep) for ep in split_episodes(first_run + second_run)] == [3, 2]
