"""The wire protocol between the robot runtime and the robot: messages, framing, and a pyserial link.

numpy + stdlib + ``cobs`` + ``pyserial`` only; importing this package opens nothing. Spec: PROTOCOL.md.
"""

from deploy.wire.codec import ERROR_KINDS, FrameDecoder, FrameError, decode_body, encode, encode_body
from deploy.wire.link import DEFAULT_BAUDRATE, FdTransport, Link, LinkError, SerialTransport
from deploy.wire.messages import (
    HOLD_SEQ,
    PROTOCOL_VERSION,
    SEQ_MAX,
    AckMsg,
    CommandMsg,
    ErrorCode,
    ErrorMsg,
    EStopMsg,
    EStopReason,
    HeartbeatMsg,
    HomeMsg,
    Message,
    MsgType,
    StateFlags,
    StateMsg,
    seq_after,
    seq_distance,
    seq_newer,
)

__all__ = [
    "DEFAULT_BAUDRATE",
    "ERROR_KINDS",
    "HOLD_SEQ",
    "PROTOCOL_VERSION",
    "SEQ_MAX",
    "AckMsg",
    "CommandMsg",
    "EStopMsg",
    "EStopReason",
    "ErrorCode",
    "ErrorMsg",
    "FdTransport",
    "FrameDecoder",
    "FrameError",
    "HeartbeatMsg",
    "HomeMsg",
    "Link",
    "LinkError",
    "Message",
    "MsgType",
    "SerialTransport",
    "StateFlags",
    "StateMsg",
    "decode_body",
    "encode",
    "encode_body",
    "seq_after",
    "seq_distance",
    "seq_newer",
]
