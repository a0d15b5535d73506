"""A message link over pyserial (a real port, a pty, ``loop://``, ``socket://host:port``) or a raw file descriptor.

Nothing happens at import: a port is opened only when a ``Link`` is constructed.

    link = Link("/dev/ttyUSB0", baudrate=1_000_000)
    link.send(HeartbeatMsg(seq=1, t_s=time.monotonic()))
    for msg in link.poll(timeout_s=0.01):
        ...

``poll`` waits at most ``timeout_s`` for the first complete message and returns everything decoded so far.
Bad bytes never raise: they are counted in ``link.decoder.errors``. A port that fails (unplugged, closed
peer) raises ``LinkError``, which the caller treats as a cut link.
"""

from __future__ import annotations

import errno
import os
import select
import time
from typing import Protocol

import serial

from deploy.wire.codec import DELIMITER, FrameDecoder, encode
from deploy.wire.messages import Message

READ_CHUNK = 65536  # bytes read per system call
DEFAULT_BAUDRATE = 1_000_000  # ignored by ptys and sockets; a USB serial adapter needs it set
DEFAULT_WRITE_TIMEOUT_S = 0.1  # a write that blocks longer than this means the peer stopped reading
MAX_WRITE_WAIT_S = 1.0  # longest single wait for room in the port buffer (seconds; the deadline is re-checked)


class LinkError(OSError):
    """The port failed (closed, unplugged, peer gone). Treat it as a cut link."""


class Transport(Protocol):
    """A byte stream: ``read`` waits up to ``timeout_s`` for bytes and returns what is available."""

    def read(self, timeout_s: float) -> bytes: ...

    def write(self, data: bytes) -> int: ...

    def close(self) -> None: ...


class SerialTransport:
    """pyserial port. File-descriptor ports (real ports, ptys) wait with ``select``; URL ports with their timeout."""

    def __init__(self, port: serial.SerialBase) -> None:
        self.port = port
        try:
            self._fd: int | None = port.fileno()
        except (OSError, AttributeError, ValueError):  # io.UnsupportedOperation is an OSError
            self._fd = None
        if self._fd is not None:
            port.timeout = 0  # non-blocking reads after our own select
        self._timeout: float | None = port.timeout

    def _set_timeout(self, timeout_s: float) -> None:
        if self._timeout != timeout_s:
            self.port.timeout = timeout_s
            self._timeout = timeout_s

    def read(self, timeout_s: float) -> bytes:
        try:
            if self._fd is not None:
                ready, _, _ = select.select([self._fd], [], [], max(0.0, timeout_s))
                return self.port.read(READ_CHUNK) if ready else b""
            self._set_timeout(max(0.0, timeout_s))
            first = self.port.read(1)
            if not first:
                return b""
            self._set_timeout(0.0)
            return first + self.port.read(READ_CHUNK)
        except (serial.SerialException, OSError) as err:
            raise LinkError(f"read from {self.port.name or self.port.port} failed: {err}") from err

    def write(self, data: bytes) -> int:
        if self._fd is not None:
            return self._write_fd(self._fd, data)
        try:
            return self.port.write(data) or 0
        except (serial.SerialException, OSError) as err:
            raise LinkError(f"write to {self.port.name or self.port.port} failed: {err}") from err

    def _write_fd(self, fd: int, data: bytes) -> int:
        """Write straight to the port's (non-blocking) descriptor; wait for room only when the port buffer is full,
        at most the port's ``write_timeout`` (``LinkError`` past it: the peer stopped reading). pyserial's own write
        runs a ``select`` after every write, also when all bytes went out: ~6 us of each control tick."""
        written, deadline = 0, None
        try:
            while written < len(data):
                try:
                    written += os.write(fd, data[written:])
                except BlockingIOError:
                    now = time.monotonic()
                    if deadline is None:  # pyserial's None: wait as long as it takes
                        limit = self.port.write_timeout
                        deadline = now + (float("inf") if limit is None else limit)
                    if now >= deadline:
                        raise LinkError(
                            f"write to {self.port.name or self.port.port} timed out: {len(data) - written} of "
                            f"{len(data)} bytes not taken within {self.port.write_timeout} s (the peer stopped reading)"
                        ) from None
                    select.select([], [fd], [], min(deadline - now, MAX_WRITE_WAIT_S))
        except OSError as err:
            if isinstance(err, LinkError):
                raise
            raise LinkError(f"write to {self.port.name or self.port.port} failed: {err}") from err
        return written

    def close(self) -> None:
        self.port.close()


class FdTransport:
    """A raw file descriptor, e.g. the master side of a pty (``os.openpty``). The fd is made non-blocking.

    Writes that would block (the peer is not reading and the buffer is full) are dropped and counted in
    ``dropped_bytes``, like bytes lost on a real serial line; they never stall the writer.
    """

    def __init__(self, fd: int, close_fd: bool = True) -> None:
        self.fd = fd
        self.close_fd = close_fd
        self.dropped_bytes = 0
        os.set_blocking(fd, False)

    def read(self, timeout_s: float) -> bytes:
        ready, _, _ = select.select([self.fd], [], [], max(0.0, timeout_s))
        if not ready:
            return b""
        try:
            return os.read(self.fd, READ_CHUNK)
        except BlockingIOError:
            return b""
        except OSError as err:
            if err.errno == errno.EIO:  # pty master whose slave side is closed: nothing to read
                return b""
            raise LinkError(f"read from fd {self.fd} failed: {err}") from err

    def write(self, data: bytes) -> int:
        written = 0
        try:
            while written < len(data):
                written += os.write(self.fd, data[written:])
        except BlockingIOError:
            self.dropped_bytes += len(data) - written
        except OSError as err:
            raise LinkError(f"write to fd {self.fd} failed: {err}") from err
        return written

    def close(self) -> None:
        if self.close_fd:
            os.close(self.fd)


class Link:
    """Send and receive wire messages.

    :param port: a device path (``/dev/ttyUSB0``, ``/dev/pts/3``) or a pyserial URL (``loop://``,
        ``socket://127.0.0.1:5000``).
    :param baudrate: line rate in bit/s (real serial ports only).
    :param timeout_s: default wait of ``poll`` in seconds.
    :param write_timeout_s: a write blocked longer than this raises ``LinkError`` (seconds).
    """

    def __init__(
        self,
        port: str,
        baudrate: int = DEFAULT_BAUDRATE,
        timeout_s: float = 0.0,
        write_timeout_s: float = DEFAULT_WRITE_TIMEOUT_S,
    ) -> None:
        if timeout_s < 0 or write_timeout_s < 0:
            raise ValueError(f"timeouts must be >= 0 seconds, got {timeout_s}, {write_timeout_s}")
        try:
            ser = serial.serial_for_url(port, baudrate=baudrate, timeout=0, write_timeout=write_timeout_s)
        except (serial.SerialException, ValueError) as err:
            raise LinkError(f"cannot open {port!r}: {err}. Check the port name or URL and that it exists") from err
        self._init(SerialTransport(ser), port, timeout_s)

    @classmethod
    def from_transport(cls, transport: Transport, name: str, timeout_s: float = 0.0) -> Link:
        """Wrap an open byte stream (e.g. ``FdTransport`` on a pty master)."""
        link = cls.__new__(cls)
        link._init(transport, name, timeout_s)
        return link

    def _init(self, transport: Transport, name: str, timeout_s: float) -> None:
        self.transport = transport
        self.name = name
        self.timeout_s = timeout_s
        self.decoder = FrameDecoder()
        self.sent_frames = 0
        self.closed = False
        # A lone delimiter ends any half frame the peer may hold from before we opened the port.
        self.transport.write(DELIMITER)

    def send(self, msg: Message) -> int:
        """Encode and write one message; returns the bytes written. Raises ``LinkError`` if the port fails."""
        written = self.transport.write(encode(msg))
        self.sent_frames += 1
        return written

    def send_bytes(self, data: bytes) -> int:
        """Write raw bytes (already framed, or deliberate noise in tests)."""
        return self.transport.write(data)

    def poll(self, timeout_s: float | None = None) -> list[Message]:
        """Messages received within ``timeout_s`` seconds (default: the link's); returns at the first message."""
        wait = self.timeout_s if timeout_s is None else timeout_s
        deadline = time.monotonic() + wait
        while True:
            data = self.transport.read(max(0.0, deadline - time.monotonic()))
            messages = self.decoder.feed(data) if data else []
            if messages or time.monotonic() >= deadline:
                return messages

    def close(self) -> None:
        if not self.closed:
            self.closed = True
            self.transport.close()

    def __enter__(self) -> Link:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
