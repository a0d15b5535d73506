"""Binary encoding and COBS framing of wire messages, and a streaming decoder that never raises on bad bytes.

Frame on the wire (see PROTOCOL.md)::

    0x00 | COBS( header | payload | crc32 ) | 0x00

    header  = version u8 | type u8 | seq u32 | t_s f64        (little endian, 14 bytes)
    crc32   = zlib.crc32(header | payload) as u32, little endian

The leading delimiter ends whatever garbage preceded the frame, so a valid frame is never lost to noise
before it. COBS comes from the ``cobs`` package (not hand-rolled).
"""

from __future__ import annotations

import struct
import zlib
from collections import Counter
from collections.abc import Callable

import numpy as np
from cobs import cobs

from deploy.wire.messages import (
    PROTOCOL_VERSION,
    AckMsg,
    CommandMsg,
    ErrorMsg,
    EStopMsg,
    HeartbeatMsg,
    HomeMsg,
    Message,
    StateMsg,
)

DELIMITER = b"\x00"
HEADER = struct.Struct("<BBId")
CRC = struct.Struct("<I")
MIN_FRAME = HEADER.size + CRC.size  # bytes of a decoded frame with an empty payload
FLOAT64 = np.dtype("<f8")
# Longest decoded frame: a state of 255 floats (2,040 bytes) plus header, flags, crc; COBS adds 1 byte per 254.
MAX_FRAME_BYTES = 4096

# Error kinds counted by FrameDecoder.
ERR_OVERSIZE = "oversize"  # more than MAX_FRAME_BYTES without a delimiter: dropped until the next delimiter
ERR_COBS = "cobs"  # the bytes between two delimiters are not valid COBS
ERR_SHORT = "short"  # shorter than a header + CRC
ERR_CRC = "crc"  # CRC mismatch
ERR_VERSION = "version"  # a protocol version this build does not speak
ERR_TYPE = "type"  # unknown message type
ERR_PAYLOAD = "payload"  # the payload does not match its type (length, text encoding, value range)
ERROR_KINDS = (ERR_OVERSIZE, ERR_COBS, ERR_SHORT, ERR_CRC, ERR_VERSION, ERR_TYPE, ERR_PAYLOAD)


class FrameError(ValueError):
    """A frame that was rejected; ``kind`` is one of ``ERROR_KINDS``."""

    def __init__(self, kind: str, detail: str) -> None:
        super().__init__(f"{kind}: {detail}")
        self.kind = kind


class PayloadError(ValueError):
    """A CRC-valid frame whose payload does not parse (a sender bug, not line noise)."""


# Payload encoders / decoders, one pair per message type -----------------------------------------------------
_U16 = struct.Struct("<H")
_STATE_HEAD = struct.Struct("<HB")  # flags u16, number of pending seqs u8 (then u32 each, then n u8, n f64)
_CODE_TEXT = struct.Struct("<HB")  # code u16, text length u8
_SEED = struct.Struct("<Q")


def _vector_bytes(values: np.ndarray) -> bytes:
    return values.astype(FLOAT64, copy=False).tobytes()


def _read_vector(payload: bytes, offset: int, n: int) -> np.ndarray:
    if len(payload) != offset + n * FLOAT64.itemsize:
        raise PayloadError(f"expected {n} float64 values, got {len(payload) - offset} bytes")
    return np.frombuffer(payload, dtype=FLOAT64, count=n, offset=offset).astype(np.float64)


def _enc_state(msg: StateMsg) -> bytes:
    n_pending = len(msg.pending)
    return (
        _STATE_HEAD.pack(msg.flags, n_pending)
        + struct.pack(f"<{n_pending}I", *msg.pending)
        + bytes([msg.state.size])
        + _vector_bytes(msg.state)
    )


def _dec_state(seq: int, t_s: float, payload: bytes) -> StateMsg:
    if len(payload) < _STATE_HEAD.size:
        raise PayloadError("state payload too short")
    flags, n_pending = _STATE_HEAD.unpack_from(payload)
    offset = _STATE_HEAD.size + 4 * n_pending
    if len(payload) < offset + 1:
        raise PayloadError("state payload too short for its pending list")
    pending = struct.unpack_from(f"<{n_pending}I", payload, _STATE_HEAD.size)
    return StateMsg(seq, t_s, _read_vector(payload, offset + 1, payload[offset]), flags, pending)


def _enc_command(msg: CommandMsg) -> bytes:
    return bytes([msg.action.size]) + _vector_bytes(msg.action)


def _dec_command(seq: int, t_s: float, payload: bytes) -> CommandMsg:
    if not payload:
        raise PayloadError("command payload is empty")
    return CommandMsg(seq, t_s, _read_vector(payload, 1, payload[0]))


def _enc_empty(msg: Message) -> bytes:
    return b""


def _dec_heartbeat(seq: int, t_s: float, payload: bytes) -> HeartbeatMsg:
    if payload:
        raise PayloadError("heartbeat carries no payload")
    return HeartbeatMsg(seq, t_s)


def _enc_estop(msg: EStopMsg) -> bytes:
    return _U16.pack(msg.reason)


def _dec_estop(seq: int, t_s: float, payload: bytes) -> EStopMsg:
    if len(payload) != _U16.size:
        raise PayloadError("e-stop payload must be 2 bytes")
    return EStopMsg(seq, t_s, _U16.unpack(payload)[0])


def _enc_code_text(msg: ErrorMsg | AckMsg) -> bytes:
    text = msg.text.encode("utf-8")
    return _CODE_TEXT.pack(msg.code, len(text)) + text


def _dec_code_text(cls: type[ErrorMsg] | type[AckMsg]) -> Callable[[int, float, bytes], Message]:
    def decode(seq: int, t_s: float, payload: bytes) -> Message:
        if len(payload) < _CODE_TEXT.size:
            raise PayloadError("code/text payload too short")
        code, n = _CODE_TEXT.unpack_from(payload)
        if len(payload) != _CODE_TEXT.size + n:
            raise PayloadError("text length does not match the payload")
        try:
            text = payload[_CODE_TEXT.size :].decode("utf-8")
        except UnicodeDecodeError as err:
            raise PayloadError(f"text is not UTF-8: {err}") from None
        return cls(seq, t_s, code, text)

    return decode


def _enc_home(msg: HomeMsg) -> bytes:
    return _SEED.pack(msg.seed)


def _dec_home(seq: int, t_s: float, payload: bytes) -> HomeMsg:
    if len(payload) != _SEED.size:
        raise PayloadError("home payload must be 8 bytes")
    return HomeMsg(seq, t_s, _SEED.unpack(payload)[0])


_ENCODERS: dict[type[Message], Callable] = {
    StateMsg: _enc_state,
    CommandMsg: _enc_command,
    HeartbeatMsg: _enc_empty,
    EStopMsg: _enc_estop,
    ErrorMsg: _enc_code_text,
    AckMsg: _enc_code_text,
    HomeMsg: _enc_home,
}
_DECODERS: dict[int, Callable[[int, float, bytes], Message]] = {
    StateMsg.TYPE: _dec_state,
    CommandMsg.TYPE: _dec_command,
    HeartbeatMsg.TYPE: _dec_heartbeat,
    EStopMsg.TYPE: _dec_estop,
    ErrorMsg.TYPE: _dec_code_text(ErrorMsg),
    AckMsg.TYPE: _dec_code_text(AckMsg),
    HomeMsg.TYPE: _dec_home,
}


# Frames -------------------------------------------------------------------------------------------------------
def encode_body(msg: Message) -> bytes:
    """The unframed bytes: header | payload | crc32."""
    encoder = _ENCODERS.get(type(msg))
    if encoder is None:
        raise TypeError(f"cannot encode {type(msg).__name__}; known messages: {[c.__name__ for c in _ENCODERS]}")
    body = HEADER.pack(PROTOCOL_VERSION, msg.TYPE, msg.seq, msg.t_s) + encoder(msg)
    return body + CRC.pack(zlib.crc32(body))


def encode(msg: Message) -> bytes:
    """One message as a complete frame: delimiter, COBS-encoded body, delimiter."""
    return DELIMITER + cobs.encode(encode_body(msg)) + DELIMITER


def decode_body(body: bytes) -> Message:
    """Parse unframed bytes (header | payload | crc32); raises ``FrameError`` (its ``kind`` is one of ERROR_KINDS)."""
    if len(body) < MIN_FRAME:
        raise FrameError(ERR_SHORT, f"{len(body)} bytes, a frame has at least {MIN_FRAME}")
    (crc,) = CRC.unpack_from(body, len(body) - CRC.size)
    if zlib.crc32(memoryview(body)[: -CRC.size]) != crc:
        raise FrameError(ERR_CRC, "CRC mismatch")
    version, msg_type, seq, t_s = HEADER.unpack_from(body)
    if version != PROTOCOL_VERSION:
        raise FrameError(ERR_VERSION, f"protocol version {version}, this build speaks {PROTOCOL_VERSION}")
    decoder = _DECODERS.get(msg_type)
    if decoder is None:
        raise FrameError(ERR_TYPE, f"unknown message type {msg_type}")
    try:
        return decoder(seq, t_s, bytes(body[HEADER.size : -CRC.size]))
    except ValueError as err:  # PayloadError, or a value out of range for the message
        raise FrameError(ERR_PAYLOAD, str(err)) from None


class FrameDecoder:
    """Streaming decoder: ``feed(bytes) -> list[Message]``; never raises on bad input.

    Bytes accumulate until a 0x00 delimiter; each chunk between delimiters is COBS-decoded, CRC-checked and
    parsed. A rejected chunk is counted in ``errors[kind]`` and dropped; decoding resumes at the next delimiter.
    Empty chunks (two delimiters in a row) are normal and not counted.

    :param max_frame_bytes: longest encoded chunk accepted; longer runs without a delimiter are dropped.
    """

    def __init__(self, max_frame_bytes: int = MAX_FRAME_BYTES) -> None:
        if max_frame_bytes < MIN_FRAME:
            raise ValueError(f"max_frame_bytes must be >= {MIN_FRAME}, got {max_frame_bytes}")
        self.max_frame_bytes = max_frame_bytes
        self.errors: Counter[str] = Counter()
        self.frames_ok = 0
        self.bytes_in = 0
        self._buf = bytearray()
        self._discarding = False  # inside an oversize run: drop bytes until the next delimiter

    @property
    def error_count(self) -> int:
        return sum(self.errors.values())

    def feed(self, data: bytes) -> list[Message]:
        """Consume bytes; return the messages completed by them, oldest first."""
        self.bytes_in += len(data)
        out: list[Message] = []
        start = 0
        while True:
            end = data.find(DELIMITER, start)
            if end < 0:
                self._append(data[start:])
                return out
            self._append(data[start:end])
            if self._discarding:
                self._discarding = False
            elif self._buf:
                message = self._decode_chunk(bytes(self._buf))
                if message is not None:
                    out.append(message)
            self._buf.clear()
            start = end + 1

    def _append(self, chunk: bytes) -> None:
        if self._discarding or not chunk:
            return
        if len(self._buf) + len(chunk) > self.max_frame_bytes:
            self.errors[ERR_OVERSIZE] += 1
            self._buf.clear()
            self._discarding = True
            return
        self._buf.extend(chunk)

    def _decode_chunk(self, chunk: bytes) -> Message | None:
        try:
            body = cobs.decode(chunk)
        except cobs.DecodeError:
            self.errors[ERR_COBS] += 1
            return None
        try:
            message = decode_body(body)
        except FrameError as err:
            self.errors[err.kind] += 1
            return None
        self.frames_ok += 1
        return message
