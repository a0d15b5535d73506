"""Reading tick logs (``deploy.runtime.ticklog`` writes them): every intact tick of a log, and what was skipped.

A log file is MCAP. The reader walks its records by their framing (opcode, length) and parses each with the
``mcap`` library, checking each chunk's CRC. What it cannot read it skips and counts, and never misreads:

- a torn tail (a crash or a power cut while writing; ``kill -9`` cannot tear: see ``ticklog``): the records
  before it are read, the cut record is counted in ``torn_tails``;
- a damaged chunk in the middle (bad CRC, bad framing, a message that does not decode): skipped, counted in
  ``corrupt_records``; reading carries on at the next chunk whose CRC holds.

``damage_at`` tells the fine-tuner where ticks may be missing, so it skips the episodes next to the damage.
``read_ticklog(path)`` reads all segments of a log in order; given a folder, every log in it.
"""

from __future__ import annotations

import io
import logging
import re
import struct
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from mcap.exceptions import McapError
from mcap.opcode import Opcode
from mcap.records import Attachment, Channel, Chunk, DataEnd, Footer, McapRecord, Message, Metadata, Schema
from mcap.stream_reader import StreamReader, breakup_chunk

from deploy.runtime.tick_channels import TICK_SCHEMAS, TRANSITIONS, LoggedTransition, TickDecoder, logged_fields
from deploy.runtime.tick_record import NO_EPISODE, TickRecord

logger = logging.getLogger(__name__)

TICKLOG_SUFFIX = ".mcap"
FORMAT_METADATA = "robot_grpo.ticklog"  # the metadata record naming the format version and the clock
FORMAT_VERSION = 3  # 1 and 2 were the old .tlog container (launch/convert_logs.py reads them)
READABLE_VERSIONS = (3,)
MAGIC = b"\x89MCAP0\r\n"
MAX_RECORD_BYTES = 64 << 20  # no record of a tick log is near this; a larger length is damage
_FRAME = struct.Struct("<BQ")
_KNOWN_OPCODES = frozenset(int(op) for op in Opcode)
_TICK_TOPICS = frozenset(s.topic for s in TICK_SCHEMAS)
ARRAY_FIELDS = tuple(f.name for f in logged_fields() if f.dtype is not None)  # what ``stack_field`` takes
_READ_ERRORS = (McapError, ValueError, struct.error, UnicodeDecodeError, IndexError, KeyError)


@dataclass
class TickLogScan:
    """What a read found: the ticks, the transitions, the run's metadata and attachments, and what was skipped."""

    records: list[TickRecord] = field(default_factory=list)
    transitions: list[LoggedTransition] = field(default_factory=list)
    metadata: dict[str, dict[str, str]] = field(default_factory=dict)  # of the first file that has each name
    attachments: dict[str, bytes] = field(default_factory=dict)
    files: list[Path] = field(default_factory=list)
    corrupt_records: int = 0  # damaged records (or stretches of bytes) skipped before a later valid record
    torn_tails: int = 0  # files whose last record was cut short (a crash while writing)
    skipped_bytes: int = 0
    damage_at: list[int] = field(default_factory=list)  # per skipped stretch: the index in records read after it


def segment_path(base: Path, index: int) -> Path:
    """Segment ``index`` of the log ``base``: ``base`` itself (``ticks.mcap``), then ``ticks.1.mcap``, ..."""
    return base if index == 0 else base.with_name(f"{base.stem}.{index}{TICKLOG_SUFFIX}")


def _segment_pattern(base: Path) -> re.Pattern[str]:
    return re.compile(re.escape(base.stem) + r"(?:\.(\d+))?" + re.escape(TICKLOG_SUFFIX))


def segment_indices(base: Path) -> list[int]:
    """The indices of the segments of ``base`` that exist, in order."""
    if not base.parent.is_dir():
        return []
    pattern = _segment_pattern(base)
    found = []
    for entry in base.parent.iterdir():
        match = pattern.fullmatch(entry.name)
        if match and entry.is_file():
            found.append(int(match.group(1) or 0))
    return sorted(found)


def ticklog_files(path: str | Path) -> list[Path]:
    """The segment files of a log (``path`` is its first segment) or of every ``*.mcap`` log in a folder."""
    path = Path(path)
    if path.is_dir():
        files = sorted(p for p in path.iterdir() if p.is_file() and p.name.endswith(TICKLOG_SUFFIX))
        names = {p.name for p in files}
        bases = [p for p in files if not _is_later_segment(p, names)]
        return [f for base in bases for f in ticklog_files(base)]
    indices = segment_indices(path)
    if not indices or indices[0] != 0:
        raise FileNotFoundError(f"no tick log at {path} (nor segments {path.stem}.1{TICKLOG_SUFFIX}, ...)")
    return [segment_path(path, i) for i in indices]


def _is_later_segment(path: Path, names: set[str]) -> bool:
    """``stem.N.mcap`` whose first segment ``stem.mcap`` is in the folder too."""
    match = re.fullmatch(r"(.+)\.(\d+)" + re.escape(TICKLOG_SUFFIX), path.name)
    return bool(match) and f"{match.group(1)}{TICKLOG_SUFFIX}" in names


class _FileReader:
    """Reads one MCAP file's bytes into a scan (see the module docstring)."""

    def __init__(self, data: bytes, source: Path, scan: TickLogScan) -> None:
        self.data = data
        self.source = source
        self.scan = scan
        self.schemas: dict[int, Schema] = {}
        self.channels: dict[int, Channel] = {}
        self.metadata: dict[str, dict[str, str]] = {}
        self.decoder = TickDecoder()
        self.pending: dict[int, dict[str, Any]] = {}  # sequence -> merged fields of the tick's messages so far
        self.pending_topics: dict[int, set[str]] = {}

    def read(self) -> None:
        data = self.data
        if len(data) < len(MAGIC) or not data.startswith(MAGIC):
            if MAGIC.startswith(data):  # empty, or cut inside the magic
                if data:
                    self._damage(len(data), torn=True)
                return
            raise ValueError(f"{self.source} is not a tick log (not an MCAP file)")
        for record in self._records(len(MAGIC)):
            self._take(record)
        if self.pending:  # ticks whose messages did not all arrive: damage at the end
            self.scan.corrupt_records += len(self.pending)
            self.scan.damage_at.append(len(self.scan.records))
        for name, values in self.metadata.items():
            self.scan.metadata.setdefault(name, values)

    # Framing -------------------------------------------------------------------------------------------------
    def _records(self, pos: int) -> Iterator[McapRecord]:
        data, end = self.data, len(self.data)
        while pos < end:
            if end - pos < _FRAME.size:
                self._damage(end - pos, torn=True)
                return
            opcode, length = _FRAME.unpack_from(data, pos)
            stop = pos + _FRAME.size + length
            plausible = opcode in _KNOWN_OPCODES and length <= MAX_RECORD_BYTES
            if plausible and stop > end:
                self._damage(end - pos, torn=True)
                return
            records = self._parse(pos, stop) if plausible else None
            if records is None:
                following = self._next_chunk(pos + 1)
                self._damage(following - pos, torn=False)
                pos = following
                continue
            if any(isinstance(record, (DataEnd, Footer)) for record in records):
                return  # the summary section follows: everything in it repeats the data section
            yield from records
            pos = stop

    def _parse(self, start: int, stop: int) -> list[McapRecord] | None:
        """The record at ``data[start:stop]`` (a chunk: the records in it, its CRC checked), or None if it does
        not parse."""
        try:
            reader = StreamReader(io.BytesIO(self.data[start:stop]), skip_magic=True, emit_chunks=True)
            record = next(iter(reader.records))
            if isinstance(record, Chunk):
                return breakup_chunk(record, validate_crc=True)
            return [record]
        except (*_READ_ERRORS, StopIteration):
            return None

    def _next_chunk(self, pos: int) -> int:
        """Where the next intact chunk starts at or after ``pos`` (the end of the data if none does)."""
        data, end = self.data, len(self.data)
        while (pos := data.find(bytes([Opcode.CHUNK]), pos)) != -1:
            if end - pos >= _FRAME.size:
                _, length = _FRAME.unpack_from(data, pos)
                stop = pos + _FRAME.size + length
                if length <= MAX_RECORD_BYTES and stop <= end and self._parse(pos, stop) is not None:
                    return pos
            pos += 1
        return end

    def _damage(self, n_bytes: int, torn: bool) -> None:
        if torn:
            self.scan.torn_tails += 1
        else:
            self.scan.corrupt_records += 1
        self.scan.skipped_bytes += n_bytes
        self.scan.damage_at.append(len(self.scan.records))

    # Content -------------------------------------------------------------------------------------------------
    def _take(self, record: McapRecord) -> None:
        if isinstance(record, Schema):
            self.schemas[record.id] = record
        elif isinstance(record, Channel):
            self.channels[record.id] = record
        elif isinstance(record, Metadata):
            self.metadata.setdefault(record.name, dict(record.metadata))
            if record.name == FORMAT_METADATA:
                self._check_version(record.metadata)
        elif isinstance(record, Attachment):
            self.scan.attachments.setdefault(record.name, record.data)
        elif isinstance(record, Message):
            self._message(record)

    def _check_version(self, values: dict[str, str]) -> None:
        version = values.get("format_version", "")
        if not version.isdigit() or int(version) not in READABLE_VERSIONS:
            raise ValueError(
                f"{self.source}: tick log format version {version or '(none)'}; this build reads {READABLE_VERSIONS}"
            )

    def _message(self, message: Message) -> None:
        channel = self.channels.get(message.channel_id)
        schema = self.schemas.get(channel.schema_id) if channel is not None else None
        if channel is None or schema is None:
            self._damage(len(message.data), torn=False)  # its channel's definition was in damaged bytes
            return
        if channel.topic != TRANSITIONS and channel.topic not in _TICK_TOPICS:
            return  # a channel someone else added: not ours to read
        try:
            fields = self.decoder.fields(schema.name, schema.data, message.data)
        except ValueError:
            self._damage(len(message.data), torn=False)
            return
        if channel.topic == TRANSITIONS:
            self.scan.transitions.append(self._transition(fields, message.log_time))
            return
        seq = message.sequence
        self.pending.setdefault(seq, {}).update(fields)
        topics = self.pending_topics.setdefault(seq, set())
        topics.add(channel.topic)
        if topics == _TICK_TOPICS:
            parts = self.pending.pop(seq)
            del self.pending_topics[seq]
            self.scan.records.append(self.decoder.record(parts))

    def _transition(self, fields: dict[str, Any], log_time_ns: int) -> LoggedTransition:
        offset = int(self.metadata.get(FORMAT_METADATA, {}).get("epoch_offset_ns", "0"))
        t_s = (log_time_ns - offset) / 1e9
        return LoggedTransition(int(fields["tick"]), fields["source"], fields["target"], fields["reason"], t_s)


def scan_ticklog(path: str | Path) -> TickLogScan:
    """Read a log (all its segments, or all logs in a folder) and report what was skipped."""
    scan = TickLogScan()
    for file in ticklog_files(path):
        scan.files.append(file)
        _FileReader(file.read_bytes(), file, scan).read()
    return scan


def read_ticklog(path: str | Path) -> list[TickRecord]:
    """All readable ticks of a log, in order; skipped damage is logged as a warning (see ``scan_ticklog``)."""
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
