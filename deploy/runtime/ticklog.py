"""The tick log: every control tick appended to a crash-tolerant binary file, which the fine-tuner reads.

File layout (little endian; version 2)::

    file header  = b"RGTICKLG" | u16 version | u16 flags (0) | u32 crc32 of the 12 bytes before
    record       = SYNC (4 bytes) | u32 payload length | u32 crc32(length bytes + payload) | payload
    payload      = one TickRecord (``deploy.runtime.tick_record``: numbers, arrays, reasons, policy_id)

``policy_id`` names the policy asked on the tick (its package's ``manifest_sha256``): a hot swap mid-run, or a
folder holding the logs of several packages, stays attributable, and the fine-tuner trains a package only on the
episodes it drove.

No pickle: the payload is struct-packed numbers and short strings. Each record goes out in one ``os.write``
(it is in the OS page cache, so it survives a crash of this process); ``fsync`` pushes it to the disk at a
configurable interval from a background thread, so the control tick never waits for the disk. A power cut can
tear the last record: the reader detects it (short or bad CRC) and skips it. A corrupted record in the
middle is skipped too: the reader searches for the next SYNC marker and carries on, counting what it skipped.

Rotation by size: the first segment is ``path``, the next ones ``path.1``, ``path.2``, ... A writer opened on
an existing log starts a new segment after the last one (it never appends to a possibly torn file).
``read_ticklog(path)`` reads all segments of a log in order; given a folder it reads every ``*.tlog`` log in it.
"""

from __future__ import annotations

import logging
import os
import re
import struct
import threading
import zlib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from deploy.runtime.tick_record import ARRAY_FIELDS, FORMAT_VERSION, NO_EPISODE, READABLE_VERSIONS, TickRecord

logger = logging.getLogger(__name__)

MAGIC = b"RGTICKLG"
SYNC = b"\xa7\x5dTK"
TICKLOG_SUFFIX = ".tlog"
MAX_RECORD_BYTES = 1 << 20
DEFAULT_MAX_BYTES = 64 << 20
DEFAULT_FSYNC_INTERVAL_S = 1.0

_FILE_HEAD = struct.Struct("<8sHH")
_FILE_HEADER_BYTES = _FILE_HEAD.size + 4
_REC_HEAD = struct.Struct("<4sII")
_LEN = struct.Struct("<I")


def _file_header() -> bytes:
    head = _FILE_HEAD.pack(MAGIC, FORMAT_VERSION, 0)
    return head + _LEN.pack(zlib.crc32(head))


def frame_record(payload: bytes) -> bytes:
    """SYNC + length + CRC + payload: one record as written to the file."""
    length = _LEN.pack(len(payload))
    return SYNC + length + _LEN.pack(zlib.crc32(payload, zlib.crc32(length))) + payload


def segment_path(base: Path, index: int) -> Path:
    """Segment ``index`` of the log ``base``: ``base`` itself, then ``base.1``, ``base.2``, ..."""
    return base if index == 0 else base.with_name(f"{base.name}.{index}")


def _segment_indices(base: Path) -> list[int]:
    if not base.parent.is_dir():
        return []
    pattern = re.compile(re.escape(base.name) + r"(?:\.(\d+))?$")
    found = []
    for entry in base.parent.iterdir():
        match = pattern.fullmatch(entry.name)
        if match and entry.is_file():
            found.append(int(match.group(1) or 0))
    return sorted(found)


class TickLogWriter:
    """Append-only tick log with size rotation and interval fsync.

    :param path: the log's first segment (e.g. ``runs/x/ticks.tlog``); the folder is created.
    :param fsync_interval_s: seconds between fsyncs, done by a background thread so the tick never waits for
        the disk; 0 fsyncs inline after every record (durable, slow); None never fsyncs before ``close``.
    :param max_bytes: a segment is rotated before a record would take it past this size (a segment always
        holds at least one record).
    """

    def __init__(
        self,
        path: str | Path,
        fsync_interval_s: float | None = DEFAULT_FSYNC_INTERVAL_S,
        max_bytes: int = DEFAULT_MAX_BYTES,
    ) -> None:
        if fsync_interval_s is not None and not fsync_interval_s >= 0:
            raise ValueError(f"fsync_interval_s must be >= 0 seconds or None, got {fsync_interval_s}")
        if max_bytes <= _FILE_HEADER_BYTES:
            raise ValueError(
                f"max_bytes must be larger than the {_FILE_HEADER_BYTES}-byte file header, got {max_bytes}"
            )
        self.base = Path(path)
        self.base.parent.mkdir(parents=True, exist_ok=True)
        self.fsync_interval_s = fsync_interval_s
        self.max_bytes = int(max_bytes)
        self.records_written = 0
        self.fsync_count = 0
        self.segments: list[Path] = []
        existing = _segment_indices(self.base)
        self._index = existing[-1] + 1 if existing else 0
        self._lock = threading.Lock()
        self._retired: list[int] = []
        self._fd = -1
        self._size = 0
        self._records_in_segment = 0
        self._open_segment()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        if fsync_interval_s:
            self._thread = threading.Thread(target=self._sync_loop, name="ticklog-fsync", daemon=True)
            self._thread.start()

    # Writing ---------------------------------------------------------------------------------------------
    def _open_segment(self) -> None:
        path = segment_path(self.base, self._index)
        self._fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_APPEND, 0o644)
        self._write_all(_file_header())
        self._size = _FILE_HEADER_BYTES
        self._records_in_segment = 0
        self.segments.append(path)

    def _write_all(self, data: bytes) -> None:
        view = memoryview(data)
        while view:
            written = os.write(self._fd, view)
            view = view[written:]

    def append(self, record: TickRecord) -> None:
        """Write one record (one ``os.write``); rotate first if it would overflow ``max_bytes``."""
        data = frame_record(record.encode())
        with self._lock:
            if self._fd < 0:
                raise ValueError("the tick log is closed; open a new TickLogWriter")
            if self._records_in_segment and self._size + len(data) > self.max_bytes:
                self._retired.append(self._fd)
                self._index += 1
                self._open_segment()
            self._write_all(data)
            self._size += len(data)
            self._records_in_segment += 1
            self.records_written += 1
            if self.fsync_interval_s == 0:
                os.fsync(self._fd)
                self.fsync_count += 1

    # Syncing ---------------------------------------------------------------------------------------------
    def sync(self) -> None:
        """fsync the current segment and close rotated ones; the appending thread is not blocked meanwhile."""
        with self._lock:
            if self._fd < 0:
                return
            fd = os.dup(self._fd)
            retired, self._retired = self._retired, []
        try:
            for old in retired:
                os.fsync(old)
                os.close(old)
            os.fsync(fd)
            self.fsync_count += 1
        finally:
            os.close(fd)

    def _sync_loop(self) -> None:
        interval = self.fsync_interval_s or DEFAULT_FSYNC_INTERVAL_S  # the thread only runs with an interval
        while not self._stop.wait(interval):
            try:
                self.sync()
            except OSError as err:  # a failing disk must not kill the control loop; it is reported
                logger.error("tick log fsync failed: %s", err)

    def close(self) -> None:
        """Stop the fsync thread, fsync and close every segment."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
            self._thread = None
        if self._fd < 0:
            return
        self.sync()
        with self._lock:
            os.close(self._fd)
            self._fd = -1

    def __enter__(self) -> TickLogWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


# Reading -------------------------------------------------------------------------------------------------
@dataclass
class TickLogScan:
    """What a read found: the records, and what it had to skip."""

    records: list[TickRecord] = field(default_factory=list)
    files: list[Path] = field(default_factory=list)
    corrupt_records: int = 0  # damaged records (or stretches of bytes) skipped before a later valid record
    torn_tails: int = 0  # files whose last record was cut short (a crash while writing)
    skipped_bytes: int = 0
    damage_at: list[int] = field(default_factory=list)  # per skipped stretch: the index in records read after it


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


def _scan_bytes(data: bytes, source: Path, scan: TickLogScan) -> None:
    if len(data) < _FILE_HEADER_BYTES:
        if not MAGIC.startswith(data[: len(MAGIC)]):
            raise ValueError(f"{source} is not a tick log (no {MAGIC!r} header)")
        if data:
            scan.torn_tails += 1
            scan.damage_at.append(len(scan.records))
        return
    magic, version, _ = _FILE_HEAD.unpack_from(data, 0)
    if magic != MAGIC:
        raise ValueError(f"{source} is not a tick log (no {MAGIC!r} header)")
    (header_crc,) = _LEN.unpack_from(data, _FILE_HEAD.size)
    if header_crc != zlib.crc32(data[: _FILE_HEAD.size]):
        raise ValueError(f"{source}: the file header is corrupt (CRC mismatch)")
    if version not in READABLE_VERSIONS:
        raise ValueError(f"{source}: tick log format version {version}; this build reads {READABLE_VERSIONS}")
    pos, end = _FILE_HEADER_BYTES, len(data)
    while pos < end:
        if data.startswith(SYNC, pos) and pos + _REC_HEAD.size <= end:
            _, length, crc = _REC_HEAD.unpack_from(data, pos)
            stop = pos + _REC_HEAD.size + length
            if length <= MAX_RECORD_BYTES and stop <= end:
                payload = data[pos + _REC_HEAD.size : stop]
                if zlib.crc32(payload, zlib.crc32(data[pos + 4 : pos + 8])) == crc:
                    try:
                        scan.records.append(TickRecord.decode(payload, version))
                        pos = stop
                        continue
                    except ValueError:
                        pass
        following = data.find(SYNC, pos + 1)
        scan.damage_at.append(len(scan.records))
        if following == -1:
            if _is_torn_prefix(data[pos:]):
                scan.torn_tails += 1
            else:
                scan.corrupt_records += 1
            scan.skipped_bytes += end - pos
            return
        scan.corrupt_records += 1
        scan.skipped_bytes += following - pos
        pos = following


def ticklog_files(path: str | Path) -> list[Path]:
    """The segment files of a log (``path`` is its first segment) or of every ``*.tlog`` log in a folder."""
    path = Path(path)
    if path.is_dir():
        bases = sorted(p for p in path.iterdir() if p.is_file() and p.name.endswith(TICKLOG_SUFFIX))
        return [f for base in bases for f in ticklog_files(base)]
    indices = _segment_indices(path)
    if not indices:
        raise FileNotFoundError(f"no tick log at {path} (nor segments {path.name}.1, ...)")
    return [segment_path(path, i) for i in indices]


def scan_ticklog(path: str | Path) -> TickLogScan:
    """Read a log (all its segments, or all logs in a folder) and report what was skipped."""
    scan = TickLogScan()
    for file in ticklog_files(path):
        scan.files.append(file)
        _scan_bytes(file.read_bytes(), file, scan)
    return scan


def read_ticklog(path: str | Path) -> list[TickRecord]:
    """All readable records of a log, in order; skipped damage is logged as a warning (see ``scan_ticklog``)."""
    return warn_damage(scan_ticklog(path), path).records


def warn_damage(scan: TickLogScan, path: str | Path) -> TickLogScan:
    """Log a warning naming what ``scan`` of ``path`` skipped (nothing when it skipped nothing); returns ``scan``."""
    if scan.corrupt_records or scan.torn_tails:
        logger.warning(
            "tick log %s: skipped %d corrupt record(s) and %d torn tail(s), %d bytes",
            path,
            scan.corrupt_records,
            scan.torn_tails,
            scan.skipped_bytes,
        )
    return scan


def split_episodes(records: Iterable[TickRecord], min_length: int = 1) -> list[list[TickRecord]]:
    """Cut records into episodes: runs of consecutive records with the same ``episode_id`` and rising ``tick``.

    A tick counter that does not rise starts a new episode too (a new run appended to the same log restarts
    its ticks and may reuse episode ids). Records with ``episode_id == NO_EPISODE`` (connect, hold, safe stop)
    are dropped; episodes shorter than ``min_length`` ticks are dropped too.
    """
    episodes: list[list[TickRecord]] = []
    current: list[TickRecord] = []
    for record in records:
        if current and (record.episode_id != current[-1].episode_id or record.tick <= current[-1].tick):
            episodes.append(current)
            current = []
        if record.episode_id != NO_EPISODE:
            current.append(record)
    if current:
        episodes.append(current)
    return [ep for ep in episodes if len(ep) >= min_length]


def stack_field(records: Sequence[TickRecord], name: str) -> np.ndarray:
    """One array field of many records stacked on a leading axis, e.g. ``stack_field(ep, "sent")``."""
    if name not in ARRAY_FIELDS:
        raise ValueError(f"{name!r} is not an array field; choose one of {list(ARRAY_FIELDS)}")
    return np.stack([getattr(r, name) for r in records])
