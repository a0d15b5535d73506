"""Reading the old ``.tlog`` tick log container (formats 1 and 2), for ``robot-grpo convert-logs`` only.

The runtime writes MCAP now (``deploy.runtime.ticklog``); this module is what is left of the old container so
logs recorded before can be converted. Layout (little endian)::

    file header  = b"RGTICKLG" | u16 version | u16 flags (0) | u32 crc32 of the 12 bytes before
    record       = SYNC (4 bytes) | u32 payload length | u32 crc32(length bytes + payload) | payload
    payload      = f64 t_s | i64 tick | i64 episode_id | i64 state_seq | f64 latency_s | f64 jitter_s | u8 stop
                   | 5 arrays (state f64, obs_flat f32, goal f64, proposed f64, sent f64), each u16 n + n values
                   | u8 reason count, then per reason u8 length + UTF-8 bytes
                   | u8 length + ASCII policy_id (version 2; a version 1 record ends before it: policy_id "")

Segments: ``ticks.tlog``, ``ticks.tlog.1``, ... A damaged record is skipped (the reader finds the next SYNC) and
counted; a torn last record is counted as a torn tail.
"""

from __future__ import annotations

import re
import struct
import zlib
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from deploy.runtime.tick_record import TickRecord, check_policy_id

MAGIC = b"RGTICKLG"
SYNC = b"\xa7\x5dTK"
LEGACY_SUFFIX = ".tlog"
READABLE_VERSIONS = (1, 2)
MAX_RECORD_BYTES = 1 << 20
_FILE_HEAD = struct.Struct("<8sHH")
_FILE_HEADER_BYTES = _FILE_HEAD.size + 4
_REC_HEAD = struct.Struct("<4sII")
_LEN = struct.Struct("<I")
_SCALARS = struct.Struct("<dqqqddB")
_COUNT16 = struct.Struct("<H")
_ARRAYS = (("state", np.float64), ("obs_flat", np.float32), ("goal", np.float64), ("proposed", np.float64))
_ARRAYS += (("sent", np.float64),)


@dataclass
class LegacyScan:
    """The records of an old log and what its reader skipped."""

    records: list[TickRecord] = field(default_factory=list)
    files: list[Path] = field(default_factory=list)
    corrupt_records: int = 0
    torn_tails: int = 0


def decode_payload(payload: bytes, version: int) -> TickRecord:
    """One old record's payload as a TickRecord; raises ValueError if it is malformed."""
    policy_id = ""
    try:
        t_s, tick, episode_id, state_seq, latency_s, jitter_s, stop = _SCALARS.unpack_from(payload, 0)
        offset = _SCALARS.size
        arrays = {}
        for name, dtype in _ARRAYS:
            (n,) = _COUNT16.unpack_from(payload, offset)
            offset += _COUNT16.size
            nbytes = n * np.dtype(dtype).itemsize
            if offset + nbytes > len(payload):
                raise ValueError(f"array {name} runs past the record")
            arrays[name] = np.frombuffer(payload, dtype=dtype, count=n, offset=offset).copy()
            offset += nbytes
        count = payload[offset]
        offset += 1
        reasons = []
        for _ in range(count):
            size = payload[offset]
            text = payload[offset + 1 : offset + 1 + size]
            if len(text) != size:
                raise ValueError("reason runs past the record")
            reasons.append(text.decode("utf-8"))
            offset += 1 + size
        if version >= 2:
            size = payload[offset]
            raw_id = payload[offset + 1 : offset + 1 + size]
            if len(raw_id) != size:
                raise ValueError("policy_id runs past the record")
            policy_id = check_policy_id(raw_id.decode("ascii"))
            offset += 1 + size
    except (struct.error, IndexError, UnicodeDecodeError) as err:
        raise ValueError(f"malformed tick record: {err}") from None
    if offset != len(payload):
        raise ValueError(f"malformed tick record: {len(payload) - offset} trailing bytes")
    return TickRecord(
        t_s=t_s,
        tick=tick,
        reasons=tuple(reasons),
        latency_s=latency_s,
        jitter_s=jitter_s,
        episode_id=episode_id,
        state_seq=state_seq,
        stop=bool(stop),
        policy_id=policy_id,
        **arrays,
    )


def _is_torn_prefix(rest: bytes) -> bool:
    """True if ``rest`` (the unreadable end of a file) looks like the start of a record cut short."""
    if len(rest) < len(SYNC):
        return SYNC.startswith(rest)
    if not rest.startswith(SYNC):
        return False
    if len(rest) < _REC_HEAD.size:
        return True
    _, length, _ = _REC_HEAD.unpack_from(rest, 0)
    return length <= MAX_RECORD_BYTES and _REC_HEAD.size + length > len(rest)


def _read_file(data: bytes, source: Path, scan: LegacyScan) -> None:
    if len(data) < _FILE_HEADER_BYTES:
        if not MAGIC.startswith(data[: len(MAGIC)]):
            raise ValueError(f"{source} is not an old tick log (no {MAGIC!r} header)")
        scan.torn_tails += bool(data)
        return
    magic, version, _ = _FILE_HEAD.unpack_from(data, 0)
    if magic != MAGIC:
        raise ValueError(f"{source} is not an old tick log (no {MAGIC!r} header)")
    if _LEN.unpack_from(data, _FILE_HEAD.size)[0] != zlib.crc32(data[: _FILE_HEAD.size]):
        raise ValueError(f"{source}: the file header is corrupt (CRC mismatch)")
    if version not in READABLE_VERSIONS:
        raise ValueError(f"{source}: tick log format version {version}; the converter reads {READABLE_VERSIONS}")
    pos, end = _FILE_HEADER_BYTES, len(data)
    while pos < end:
        if data.startswith(SYNC, pos) and pos + _REC_HEAD.size <= end:
            _, length, crc = _REC_HEAD.unpack_from(data, pos)
            stop = pos + _REC_HEAD.size + length
            if length <= MAX_RECORD_BYTES and stop <= end:
                payload = data[pos + _REC_HEAD.size : stop]
                if zlib.crc32(payload, zlib.crc32(data[pos + 4 : pos + 8])) == crc:
                    try:
                        scan.records.append(decode_payload(payload, version))
                        pos = stop
                        continue
                    except ValueError:
                        pass
        following = data.find(SYNC, pos + 1)
        if following == -1:
            torn = _is_torn_prefix(data[pos:])
            scan.torn_tails += torn
            scan.corrupt_records += not torn
            return
        scan.corrupt_records += 1
        pos = following


def legacy_files(path: Path) -> list[Path]:
    """The segment files of an old log (``path`` is its first segment) or of every ``*.tlog`` log in a folder."""
    if path.is_dir():
        return [f for base in sorted(path.glob(f"*{LEGACY_SUFFIX}")) if base.is_file() for f in legacy_files(base)]
    pattern = re.compile(re.escape(path.name) + r"(?:\.(\d+))?")
    found = sorted(
        int(m.group(1) or 0) for e in path.parent.iterdir() if (m := pattern.fullmatch(e.name)) and e.is_file()
    )
    if not found or found[0] != 0:
        raise FileNotFoundError(f"no old tick log at {path} (nor segments {path.name}.1, ...)")
    return [path if i == 0 else path.with_name(f"{path.name}.{i}") for i in found]


def read_legacy_log(path: Path) -> LegacyScan:
    """Every readable record of an old log (all its segments), with what was skipped."""
    scan = LegacyScan()
    for file in legacy_files(path):
        scan.files.append(file)
        _read_file(file.read_bytes(), file, scan)
    return scan
