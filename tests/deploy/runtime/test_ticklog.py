"""The MCAP tick log: round trip, the mcap library's view, torn tails at every byte, corrupt middle chunks,
rotation, fsync, metadata and attachments, transitions, episodes."""

from __future__ import annotations

import os
import struct
import threading

import numpy as np
import pytest
from mcap.reader import make_reader

from deploy.runtime import ticklog
from deploy.runtime.tick_channels import TICK_SCHEMAS, TRANSITIONS
from deploy.runtime.tick_record import MAX_POLICY_ID_BYTES, NO_EPISODE, TICK_CHANNELS, TickRecord
from deploy.runtime.ticklog import (
    FORMAT_METADATA,
    LogAttachment,
    TickLogWriter,
    read_ticklog,
    scan_ticklog,
    split_episodes,
    stack_field,
    ticklog_files,
)
from deploy.runtime.ticklog_read import MAGIC

POLICY_IDS = ("a" * 64, "", "0123456789abcdef" * 4)  # manifest digests, and a tick no policy was asked on
CHUNK = 0x06  # MCAP opcode of a chunk
FRAME = struct.Struct("<BQ")


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
        verdict="accepted" if i % 2 else "too_fast",
        bound_low=rng.normal(size=3),
        bound_high=rng.normal(size=3),
    )


SCALARS = ("t_s", "tick", "reasons", "latency_s", "jitter_s", "episode_id", "state_seq", "stop", "policy_id", "verdict")
ARRAYS = ("state", "obs_flat", "goal", "proposed", "sent", "bound_low", "bound_high")


def same(a: TickRecord, b: TickRecord) -> bool:
    def equal(x, y):  # NaN == NaN here: the log keeps a NaN as it was
        return x == y or (isinstance(x, float) and np.isnan(x) and np.isnan(y))

    return all(equal(getattr(a, n), getattr(b, n)) for n in SCALARS) and all(
        np.array_equal(getattr(a, n), getattr(b, n), equal_nan=True) and getattr(a, n).dtype == getattr(b, n).dtype
        for n in ARRAYS
    )


def write(path, records, **kwargs):
    with TickLogWriter(path, fsync_interval_s=None, **kwargs) as writer:
        for r in records:
            writer.append(r)
    return writer


def chunk_offsets(data: bytes) -> list[int]:
    """Offsets of the chunk records in the data section, walking the MCAP framing."""
    pos, found = len(MAGIC), []
    while pos + FRAME.size <= len(data):
        opcode, length = FRAME.unpack_from(data, pos)
        if opcode == 0x0F:  # DataEnd: the summary follows
            break
        if opcode == CHUNK:
            found.append(pos)
        pos += FRAME.size + length
    return found


def test_round_trip_bit_exact_with_nan_and_inf(tmp_path):
    records = [make_record(i, reasons=("clip", "workspace_barrier") if i % 2 else ()) for i in range(20)]
    records.append(make_record(20, reasons=("ünïcode",)))
    records[5].latency_s = float("nan")  # a held tick
    records[6].proposed = np.array([np.nan, np.inf, -np.inf, 0.0])  # a policy fault, logged as it was
    write(tmp_path / "ticks.mcap", records)
    back = read_ticklog(tmp_path / "ticks.mcap")
    assert len(back) == len(records)
    assert all(same(a, b) for a, b in zip(records, back, strict=True))
    assert back[3].obs_flat.dtype == np.float32 and back[3].state.dtype == np.float64
    assert (tmp_path / "ticks.mcap").read_bytes().startswith(MAGIC)


def test_the_mcap_library_lists_the_channels_schemas_and_one_message_per_tick_and_channel(tmp_path):
    path = tmp_path / "ticks.mcap"
    with TickLogWriter(path, fsync_interval_s=None) as writer:
        for i in range(12):
            writer.append(make_record(i))
        writer.add_transition(3, "hold", "homing", "held 3 fresh states", 0.12)
    with open(path, "rb") as f:
        summary = make_reader(f).get_summary()
    topics = {c.topic: c for c in summary.channels.values()}
    assert set(topics) == {*TICK_CHANNELS, TRANSITIONS}
    counts = summary.statistics.channel_message_counts
    assert {topics[t].id: counts[topics[t].id] for t in TICK_CHANNELS} == {topics[t].id: 12 for t in TICK_CHANNELS}
    assert counts[topics[TRANSITIONS].id] == 1
    assert {s.name for s in summary.schemas.values()} == {s.schema_name for s in TICK_SCHEMAS} | {
        "robot_grpo.ticklog.Transition"
    }
    assert all(s.encoding == "protobuf" for s in summary.schemas.values())
    with open(path, "rb") as f:  # and its message reader walks every message
        assert sum(1 for _ in make_reader(f).iter_messages()) == 12 * len(TICK_CHANNELS) + 1


def test_metadata_attachments_and_transitions_read_back(tmp_path):
    path = tmp_path / "ticks.mcap"
    spec = LogAttachment("robot_spec.yaml", "application/yaml", b"robot_id: sim\n")
    with TickLogWriter(path, fsync_interval_s=None, metadata={"run": {"policy_id": "a" * 64}}, attachments=[spec]) as w:
        w.append(make_record(0))
        w.add_transition(1, "run", "safe_stop", "watchdog", t_s=0.5)
    scan = scan_ticklog(path)
    assert scan.metadata["run"] == {"policy_id": "a" * 64}
    assert scan.metadata[FORMAT_METADATA]["format_version"] == "3"
    assert scan.attachments == {"robot_spec.yaml": b"robot_id: sim\n"}
    [transition] = scan.transitions
    assert (transition.tick, transition.source, transition.target, transition.reason) == (
        1,
        "run",
        "safe_stop",
        "watchdog",
    )
    assert transition.t_s == pytest.approx(0.5, abs=1e-9)
    with pytest.raises(ValueError, match="the log's own"):
        TickLogWriter(tmp_path / "other.mcap", metadata={FORMAT_METADATA: {}})


def test_truncating_the_last_tick_at_every_byte_keeps_the_earlier_ones(tmp_path):
    """A process that dies mid-write (power cut) leaves a torn last chunk: never misread, the rest intact."""
    path = tmp_path / "ticks.mcap"
    records = [make_record(i) for i in range(5)]
    writer = TickLogWriter(path, fsync_interval_s=None)
    for r in records:
        writer.append(r)
    data = path.read_bytes()  # before close: no summary, as after a crash
    writer.close()
    last_start = chunk_offsets(data)[-1]
    for cut in range(last_start, len(data)):
        path.write_bytes(data[:cut])
        scan = scan_ticklog(path)
        assert len(scan.records) == 4, cut
        assert all(same(a, b) for a, b in zip(records[:4], scan.records, strict=True))
        assert scan.corrupt_records == 0, cut
        assert scan.torn_tails == (1 if cut > last_start else 0), cut
        assert scan.damage_at == ([4] if cut > last_start else []), cut
    path.write_bytes(data)
    assert len(read_ticklog(path)) == 5


def test_a_file_cut_inside_its_header_reads_as_empty(tmp_path):
    path = tmp_path / "ticks.mcap"
    write(path, [make_record(0)])
    data = path.read_bytes()
    first = chunk_offsets(data)[0]
    for cut in (0, 3, len(MAGIC), 12, first):
        path.write_bytes(data[:cut])
        assert scan_ticklog(path).records == []


@pytest.mark.parametrize("where", ["payload", "crc", "length", "opcode"])
def test_a_corrupted_middle_chunk_is_skipped_and_counted(tmp_path, where):
    path = tmp_path / "ticks.mcap"
    records = [make_record(i) for i in range(6)]
    write(path, records)
    data = bytearray(path.read_bytes())
    starts = chunk_offsets(bytes(data))
    # chunk layout: opcode | u64 length | u64 start | u64 end | u64 size | u32 crc | ...
    offset = {"opcode": 0, "length": 5, "crc": 33, "payload": 120}[where]
    data[starts[2] + offset] ^= 0xFF  # damage tick 2
    path.write_bytes(bytes(data))
    scan = scan_ticklog(path)
    assert [r.tick for r in scan.records] == [0, 1, 3, 4, 5]
    assert scan.corrupt_records == 1
    assert scan.torn_tails == 0
    assert scan.skipped_bytes == starts[3] - starts[2]
    assert scan.damage_at == [2]  # the first tick read after the skipped stretch (tick 3) is scan.records[2]


def test_garbage_between_chunks_is_skipped(tmp_path):
    path = tmp_path / "ticks.mcap"
    write(path, [make_record(0), make_record(1)])
    data = path.read_bytes()
    second = chunk_offsets(data)[1]
    path.write_bytes(data[:second] + b"\x06garbage\x00" + data[second:])
    scan = scan_ticklog(path)
    assert [r.tick for r in scan.records] == [0, 1]
    assert scan.corrupt_records == 1


def test_not_a_tick_log_and_a_future_version_are_refused(tmp_path):
    other = tmp_path / "other.mcap"
    other.write_bytes(b"hello world, not a log at all")
    with pytest.raises(ValueError, match="not a tick log"):
        read_ticklog(other)
    with pytest.raises(FileNotFoundError, match="no tick log"):
        read_ticklog(tmp_path / "missing.mcap")
    with pytest.raises(ValueError, match=r"\*\.mcap"):
        TickLogWriter(tmp_path / "ticks.tlog")
    path = tmp_path / "future.mcap"
    write(path, [make_record(0)])
    data = path.read_bytes()
    needle = b"format_version\x01\x00\x00\x003"  # the metadata value "3", length-prefixed
    assert data.count(needle) == 1
    path.write_bytes(data.replace(needle, needle[:-1] + b"9"))
    with pytest.raises(ValueError, match=r"format version 9; this build reads \(3,\)"):
        read_ticklog(path)


@pytest.mark.parametrize("bad", ["ü" * 3, "a\nb", "x" * (MAX_POLICY_ID_BYTES + 1)])
def test_a_policy_id_the_log_cannot_hold_is_refused_on_append(tmp_path, bad):
    record = make_record(0)
    record.policy_id = bad
    with TickLogWriter(tmp_path / "ticks.mcap", fsync_interval_s=None) as writer:
        with pytest.raises(ValueError, match="printable ASCII"):
            writer.append(record)
        assert writer.records_written == 0


def test_rotation_by_size_keeps_order_and_every_record(tmp_path):
    path = tmp_path / "ticks.mcap"
    records = [make_record(i) for i in range(30)]
    one = write(tmp_path / "one.mcap", records[:1])
    header_and_one = one.segments[0].stat().st_size
    writer = write(path, records, max_bytes=header_and_one + 3 * 700)  # a few ticks per segment
    assert len(writer.segments) > 3
    assert [p.name for p in writer.segments[:3]] == ["ticks.mcap", "ticks.1.mcap", "ticks.2.mcap"]
    assert ticklog_files(path) == writer.segments
    assert [r.tick for r in read_ticklog(path)] == list(range(30))
    # every segment stands alone: the mcap library reads each with its own channels
    for segment in writer.segments:
        with open(segment, "rb") as f:
            assert {c.topic for c in make_reader(f).get_summary().channels.values()} >= set(TICK_CHANNELS)
    # a second writer on the same log starts a new segment after the last one and never appends to old ones
    sizes = [p.stat().st_size for p in writer.segments]
    write(path, [make_record(30)])
    assert [p.stat().st_size for p in writer.segments] == sizes
    assert [r.tick for r in read_ticklog(path)] == list(range(31))
    # a folder reads every log in it, each log's segments in order
    write(tmp_path / "another.mcap", [make_record(99)])
    assert sorted(r.tick for r in read_ticklog(tmp_path)) == sorted([0, *range(31), 99])


def test_a_tick_larger_than_max_bytes_still_gets_its_own_segment(tmp_path):
    path = tmp_path / "ticks.mcap"
    writer = write(path, [make_record(0), make_record(1)], max_bytes=20)
    assert len(writer.segments) == 2
    assert [r.tick for r in read_ticklog(path)] == [0, 1]


def test_fsync_inline_every_record(tmp_path, monkeypatch):
    calls = []
    real = os.fsync
    monkeypatch.setattr(ticklog.os, "fsync", lambda fd: (calls.append(fd), real(fd)))
    with TickLogWriter(tmp_path / "t.mcap", fsync_interval_s=0) as writer:
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
    writer = TickLogWriter(tmp_path / "t.mcap", fsync_interval_s=0.001)
    writer.append(make_record(0))
    assert done.wait(timeout=10.0)  # returns as soon as the thread has synced
    writer.close()
    assert "ticklog-fsync" in synced_from
    with pytest.raises(ValueError, match="closed"):
        writer.append(make_record(1))


def test_bad_writer_arguments(tmp_path):
    with pytest.raises(ValueError, match="fsync_interval_s"):
        TickLogWriter(tmp_path / "t.mcap", fsync_interval_s=-1)
    with pytest.raises(ValueError, match="max_bytes"):
        TickLogWriter(tmp_path / "t.mcap", max_bytes=0)


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
