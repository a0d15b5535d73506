"""The tick log: every control tick appended to a crash-tolerant MCAP file, which the fine-tuner, the report and
Foxglove / PlotJuggler read.

A log is one or more MCAP files (segments): ``ticks.mcap``, then ``ticks.1.mcap``, ``ticks.2.mcap``, ... when a
segment passes ``max_bytes``. Each segment stands alone: header, the run's metadata (``robot_grpo.ticklog``: format
version and clock; whatever the caller adds: robot spec, package id, launch config) and attachments, the channels
of ``deploy.runtime.tick_channels`` (protobuf, one schema per channel) and, per tick, one MCAP chunk holding the
tick's message on every channel (they share the MCAP ``sequence`` number), uncompressed, with its CRC.

Crash tolerance (measured: ``tests/deploy/runtime/test_ticklog_crash.py``): each chunk goes to the OS in one
``os.write`` before ``append`` returns, so after ``kill -9`` every tick appended before the kill is in the file;
``fsync`` pushes it to the disk at an interval, from a background thread, so the control tick never waits for the
disk. A power cut can tear the last chunk: the reader (``deploy.runtime.ticklog_read``) stops before it. A
damaged chunk in the middle fails its CRC and is skipped, counted, and the reader carries on at the next chunk.
``close`` writes the MCAP summary (schemas, channels, message counts) and footer; a segment the process never
closed (a crash) reads the same without them.

The summary holds no chunk index: an index entry per tick would cost memory for the whole segment and a stall
at rotation, on the control thread. Tools read such a file through from the start (Foxglove says "unindexed").
A writer opened on an existing log starts a new segment after the last one (it never appends to a possibly torn
file).
"""

from __future__ import annotations

import logging
import math
import os
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from mcap.writer import CompressionType, IndexType, Writer

from deploy.runtime.tick_channels import (
    MESSAGE_ENCODING,
    SCHEMA_ENCODING,
    TICK_SCHEMAS,
    TRANSITION_SCHEMA,
    TickEncoder,
)
from deploy.runtime.tick_record import TickRecord
from deploy.runtime.ticklog_read import (  # noqa: F401  (the reader's API, re-exported for the log's users)
    FORMAT_METADATA,
    FORMAT_VERSION,
    TICKLOG_SUFFIX,
    TickLogScan,
    read_ticklog,
    scan_ticklog,
    segment_indices,
    segment_path,
    split_episodes,
    stack_field,
    ticklog_files,
    warn_damage,
)

logger = logging.getLogger(__name__)

DEFAULT_MAX_BYTES = 8 << 20  # ~16k ticks (11 min at 25 Hz) per segment: the writer keeps ~0.4 kB per tick in memory
DEFAULT_FSYNC_INTERVAL_S = 1.0
NS_PER_S = 1_000_000_000
CHUNK_BYTES_NEVER = 1 << 62  # the mcap writer closes a chunk only when told (one chunk per tick)
WRITER_LIBRARY = f"robot-grpo tick log {FORMAT_VERSION}"


@dataclass(frozen=True)
class LogAttachment:
    """A file the log carries (the robot spec, the launch config, the package manifest)."""

    name: str
    media_type: str
    data: bytes


class TickPublisher(Protocol):
    """Something that also receives every tick the log writes (the Foxglove live view); must never block."""

    def publish_tick(self, record: TickRecord, payloads: Sequence[bytes], log_time_ns: int) -> None: ...

    def publish_transition(self, payload: bytes, log_time_ns: int) -> None: ...


class _FdStream:
    """The file the mcap writer writes to: bytes are gathered in memory and handed to the OS in one ``os.write``
    per ``flush`` (a tick's chunk reaches the page cache whole, or not at all when the process dies first)."""

    def __init__(self, fd: int) -> None:
        self.fd = fd
        self._parts: list[bytes] = []
        self._position = 0

    def write(self, data: bytes) -> int:
        self._parts.append(bytes(data))
        self._position += len(data)
        return len(data)

    def tell(self) -> int:
        return self._position

    def flush(self) -> None:
        if not self._parts:
            return
        view = memoryview(b"".join(self._parts))
        self._parts.clear()
        while view:
            view = view[os.write(self.fd, view) :]


class _Segment:
    """One MCAP file of the log, opened with its header, metadata, attachments, schemas and channels."""

    def __init__(
        self, path: Path, metadata: Mapping[str, Mapping[str, str]], attachments: Sequence[LogAttachment]
    ) -> None:
        self.path = path
        self.fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_APPEND, 0o644)
        self.stream = _FdStream(self.fd)
        self.writer = Writer(
            self.stream,
            chunk_size=CHUNK_BYTES_NEVER,
            compression=CompressionType.NONE,
            index_types=IndexType.ATTACHMENT | IndexType.METADATA,
        )
        self.writer.start(profile="", library=WRITER_LIBRARY)
        self.tick_channels = [self._channel(s.topic, s.schema_name, s.schema_data) for s in TICK_SCHEMAS]
        t = TRANSITION_SCHEMA
        self.transition_channel = self._channel(t.topic, t.schema_name, t.schema_data)
        for name, values in metadata.items():
            self.writer.add_metadata(name, dict(values))
        for item in attachments:
            self.writer.add_attachment(time.time_ns(), time.time_ns(), item.name, item.media_type, item.data)
        self.writer.flush()
        self.records = 0
        self.transitions = 0

    def _channel(self, topic: str, schema_name: str, schema_data: bytes) -> int:
        schema_id = self.writer.register_schema(schema_name, SCHEMA_ENCODING, schema_data)
        return self.writer.register_channel(topic, MESSAGE_ENCODING, schema_id)

    @property
    def size(self) -> int:
        return self.stream.tell()

    def write_tick(self, payloads: Sequence[bytes], log_time_ns: int) -> None:
        self.records += 1
        for channel, payload in zip(self.tick_channels, payloads, strict=True):
            self.writer.add_message(channel, log_time_ns, payload, log_time_ns, sequence=self.records)
        self.writer.flush()

    def write_transition(self, payload: bytes, log_time_ns: int) -> None:
        self.transitions += 1
        self.writer.add_message(self.transition_channel, log_time_ns, payload, log_time_ns, self.transitions)
        self.writer.flush()

    def finish(self) -> None:
        """Write the summary and footer (the file is then complete; the fd stays open for a last fsync)."""
        self.writer.finish()
        self.stream.flush()


class TickLogWriter:
    """Append-only MCAP tick log with size rotation and interval fsync.

    :param path: the log's first segment (e.g. ``runs/x/ticks.mcap``); the folder is created.
    :param fsync_interval_s: seconds between fsyncs, done by a background thread so the tick never waits for
        the disk; 0 fsyncs inline after every record (durable, slow); None never fsyncs before ``close``.
    :param max_bytes: a new segment starts once the current one has reached this size (a segment always holds at
        least one tick).
    :param metadata: MCAP metadata records of every segment, name -> {key: value} (strings): the run, the package.
    :param attachments: files every segment carries (the robot spec, the launch config).
    :param live: also receives every tick and transition written (the live view); None: nobody.
    """

    def __init__(
        self,
        path: str | Path,
        fsync_interval_s: float | None = DEFAULT_FSYNC_INTERVAL_S,
        max_bytes: int = DEFAULT_MAX_BYTES,
        metadata: Mapping[str, Mapping[str, str]] | None = None,
        attachments: Sequence[LogAttachment] = (),
        live: TickPublisher | None = None,
    ) -> None:
        if fsync_interval_s is not None and not fsync_interval_s >= 0:
            raise ValueError(f"fsync_interval_s must be >= 0 seconds or None, got {fsync_interval_s}")
        if max_bytes < 1:
            raise ValueError(f"max_bytes must be a positive size in bytes, got {max_bytes}")
        if metadata and FORMAT_METADATA in metadata:
            raise ValueError(f"metadata {FORMAT_METADATA!r} is the log's own; name the caller's metadata otherwise")
        self.base = Path(path)
        if self.base.suffix != TICKLOG_SUFFIX:
            raise ValueError(f"a tick log is an MCAP file: name it *{TICKLOG_SUFFIX}, got {self.base.name}")
        self.base.parent.mkdir(parents=True, exist_ok=True)
        self.fsync_interval_s = fsync_interval_s
        self.max_bytes = int(max_bytes)
        self.live = live
        # MCAP log times are nanoseconds since the Unix epoch: the loop's monotonic clock plus this offset
        self.epoch_offset_ns = time.time_ns() - time.monotonic_ns()
        own = {FORMAT_METADATA: {"format_version": str(FORMAT_VERSION), "epoch_offset_ns": str(self.epoch_offset_ns)}}
        self._metadata = {**own, **{k: dict(v) for k, v in (metadata or {}).items()}}
        self._attachments = tuple(attachments)
        self._encoder = TickEncoder()
        self.records_written = 0
        self.fsync_count = 0
        self.segments: list[Path] = []
        existing = segment_indices(self.base)
        self._index = existing[-1] + 1 if existing else 0
        self._lock = threading.Lock()
        self._retired: list[int] = []
        self._segment: _Segment | None = None
        self._last_log_time_ns = self.epoch_offset_ns
        self._open_segment()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        if fsync_interval_s:
            self._thread = threading.Thread(target=self._sync_loop, name="ticklog-fsync", daemon=True)
            self._thread.start()

    # Writing ---------------------------------------------------------------------------------------------
    def _open_segment(self) -> None:
        path = segment_path(self.base, self._index)
        self._segment = _Segment(path, self._metadata, self._attachments)
        self.segments.append(path)

    def _log_time_ns(self, t_s: float) -> int:
        """The MCAP log time of loop time ``t_s`` (seconds); a non-finite time keeps the last one."""
        if math.isfinite(t_s):
            self._last_log_time_ns = max(0, int(t_s * NS_PER_S) + self.epoch_offset_ns)
        return self._last_log_time_ns

    def _live_segment(self) -> _Segment:
        segment = self._segment
        if segment is None:
            raise ValueError("the tick log is closed; open a new TickLogWriter")
        return segment

    def append(self, record: TickRecord) -> None:
        """Write one tick (one chunk, one ``os.write``); start a new segment first if this one is full."""
        payloads = self._encoder.encode(record)
        with self._lock:
            segment = self._live_segment()
            if segment.records and segment.size >= self.max_bytes:
                segment.finish()
                self._retired.append(segment.fd)
                self._index += 1
                self._open_segment()
                segment = self._live_segment()
            log_time_ns = self._log_time_ns(record.t_s)
            segment.write_tick(payloads, log_time_ns)
            self.records_written += 1
            if self.fsync_interval_s == 0:
                os.fsync(segment.fd)
                self.fsync_count += 1
        if self.live is not None:
            self.live.publish_tick(record, payloads, log_time_ns)

    def add_transition(self, tick: int, source: str, target: str, reason: str, t_s: float) -> None:
        """Log a state machine transition at ``tick`` (loop time ``t_s``, seconds) on the transitions channel."""
        payload = self._encoder.encode_transition(tick, source, target, reason)
        with self._lock:
            log_time_ns = self._log_time_ns(t_s)
            self._live_segment().write_transition(payload, log_time_ns)
        if self.live is not None:
            self.live.publish_transition(payload, log_time_ns)

    # Syncing ---------------------------------------------------------------------------------------------
    def sync(self) -> None:
        """fsync the current segment and close rotated ones; the appending thread is not blocked meanwhile."""
        with self._lock:
            if self._segment is None:
                return
            fd = os.dup(self._segment.fd)
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
        """Stop the fsync thread, write the summary, fsync and close every segment."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
            self._thread = None
        with self._lock:
            segment = self._segment
            if segment is None:
                return
            segment.finish()
        self.sync()
        with self._lock:
            os.close(segment.fd)
            self._segment = None

    def __enter__(self) -> TickLogWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
