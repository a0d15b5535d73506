"""Wire messages between the robot runtime and the robot (or the simulated robot).

numpy + stdlib only: both the runtime (on the robot computer) and the sim side import this module.
Every message carries a sequence number (``seq``, unsigned 32 bit, 1..SEQ_MAX, wraps to 1) and the sender's timestamp
(``t_s``, seconds on the sender's monotonic clock). The byte layout is in ``codec.py`` and PROTOCOL.md.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from enum import IntEnum, IntFlag
from typing import ClassVar

import numpy as np

PROTOCOL_VERSION = 1
SEQ_MODULUS = 2**32
SEQ_MAX = SEQ_MODULUS - 1  # senders number messages 1..SEQ_MAX; 0 is no message's number (it is HOLD_SEQ in pending)
MAX_VECTOR_LEN = 255  # float64 values in one state or command (length is sent as one byte)
MAX_TEXT_BYTES = 255  # UTF-8 bytes of an error / ack text (length is sent as one byte)
MAX_U16 = 2**16 - 1
HOLD_SEQ = 0  # a pending slot that holds no command of the runtime: the robot filled it with its own hold
MAX_PENDING = 255  # command sequence numbers in one state (the delay line; length sent as one byte)
MAX_SEED = 2**64 - 1


class MsgType(IntEnum):
    """Message type byte."""

    STATE = 1
    COMMAND = 2
    HEARTBEAT = 3
    ESTOP = 4
    ERROR = 5
    ACK = 6
    HOME = 7


class StateFlags(IntFlag):
    """Bits of ``StateMsg.flags``: what the robot is doing."""

    NONE = 0
    ESTOP_ACTIVE = 1  # the robot is stopped by an e-stop and ignores commands
    HOLDING = 2  # no fresh command arrived for this step: the robot applied the hold command
    ESTOP_FROM_ROBOT = 4  # the active e-stop came from the robot side (button, fault): only the operator clears it
    HOMED = 8  # this is the first state after a HomeMsg (a new episode starts here)


class EStopReason(IntEnum):
    """Reason codes of ``EStopMsg``."""

    UNSPECIFIED = 0
    WATCHDOG = 1  # the runtime saw no fresh state within its stop timeout
    RUNTIME_EXIT = 2  # the runtime is shutting down (the stop sent in ``finally``)
    SAFETY_FILTER = 3  # the safety filter asked for a safe stop
    OPERATOR = 4  # an operator pressed the e-stop
    ROBOT_FAULT = 5  # the robot detected a fault of its own


class ErrorCode(IntEnum):
    """Codes of ``ErrorMsg`` / ``AckMsg``."""

    OK = 0
    BAD_COMMAND = 1  # wrong length or non-finite values: the command was replaced by the hold command
    ESTOPPED = 2  # the command was ignored because an e-stop is active
    UNSUPPORTED = 3  # a message the receiver does not handle


def seq_after(seq: int) -> int:
    """The number a sender gives the message after ``seq``: +1, wrapping SEQ_MAX -> 1 (0 is skipped: a
    command numbered 0 could not be told from a robot-inserted hold, ``HOLD_SEQ``, in a state's pending list).
    ``seq_after(0)`` is 1, a sender's first number."""
    return seq % SEQ_MAX + 1


def seq_distance(newer: int, older: int) -> int:
    """How many messages a sender numbered from ``older`` to ``newer`` (both in 1..SEQ_MAX): 0 for the same number,
    1 for the next. Numbers live on a ring of SEQ_MAX values (0 is skipped at the wrap), so SEQ_MAX -> 1 is one
    message, not two."""
    return (newer - older) % SEQ_MAX


def seq_newer(a: int, b: int) -> bool:
    """True when sequence number ``a`` is newer than ``b`` (serial-number arithmetic, RFC 1982, 32 bit)."""
    diff = (a - b) % SEQ_MODULUS
    return 0 < diff < SEQ_MODULUS // 2


def _check_u(value: int, name: str, limit: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int | np.integer) or not 0 <= value <= limit:
        raise ValueError(f"{name} must be an integer in 0..{limit}, got {value!r}")


def _as_vector(values: np.ndarray, name: str) -> np.ndarray:
    vector = np.ascontiguousarray(values, dtype=np.float64)
    if vector.ndim != 1 or vector.size > MAX_VECTOR_LEN:
        raise ValueError(f"{name} must be a 1-D vector of at most {MAX_VECTOR_LEN} floats, got shape {vector.shape}")
    return vector


@dataclass(frozen=True, eq=False)
class Message:
    """Base of every message: sequence number and sender timestamp (seconds)."""

    seq: int
    t_s: float

    TYPE: ClassVar[int] = 0

    def __post_init__(self) -> None:
        _check_u(self.seq, "seq", SEQ_MODULUS - 1)
        object.__setattr__(self, "t_s", float(self.t_s))

    def __eq__(self, other: object) -> bool:
        """Exact equality: arrays compare bit for bit (NaN payloads and -0.0 included)."""
        if type(other) is not type(self):
            return NotImplemented
        for field in fields(self):
            a, b = getattr(self, field.name), getattr(other, field.name)
            if isinstance(a, np.ndarray):
                if a.shape != b.shape or a.tobytes() != b.tobytes():
                    return False
            elif isinstance(a, float):
                if np.float64(a).tobytes() != np.float64(b).tobytes():
                    return False
            elif a != b:
                return False
        return True

    __hash__ = None  # type: ignore[assignment]


@dataclass(frozen=True, eq=False)
class StateMsg(Message):
    """Robot state, sent by the robot once per control step.

    :param state: the contract's robot state vector, float64, in ``state_fields`` order (metres, metres per step).
    :param flags: ``StateFlags`` bits.
    :param pending: sequence numbers of the commands in the robot's actuation delay line after this step, oldest
        first (0: a hold the robot inserted itself). The runtime rebuilds the observation's action history from
        them, so a lost or late command never makes its history disagree with the robot's.
    """

    state: np.ndarray = None  # type: ignore[assignment]
    flags: int = 0
    pending: tuple[int, ...] = ()

    TYPE = MsgType.STATE

    def __post_init__(self) -> None:
        super().__post_init__()
        object.__setattr__(self, "state", _as_vector(self.state if self.state is not None else [], "state"))
        _check_u(int(self.flags), "flags", MAX_U16)
        object.__setattr__(self, "flags", int(self.flags))
        pending = tuple(int(s) for s in self.pending)
        if len(pending) > MAX_PENDING:
            raise ValueError(f"pending holds at most {MAX_PENDING} sequence numbers, got {len(pending)}")
        for value in pending:
            _check_u(value, "pending seq", SEQ_MODULUS - 1)
        object.__setattr__(self, "pending", pending)


@dataclass(frozen=True, eq=False)
class CommandMsg(Message):
    """One control command (contract units, float64), sent by the runtime once per control step."""

    action: np.ndarray = None  # type: ignore[assignment]

    TYPE = MsgType.COMMAND

    def __post_init__(self) -> None:
        super().__post_init__()
        object.__setattr__(self, "action", _as_vector(self.action if self.action is not None else [], "action"))


@dataclass(frozen=True, eq=False)
class HeartbeatMsg(Message):
    """Keep-alive / state request: the robot answers with its current state."""

    TYPE = MsgType.HEARTBEAT


@dataclass(frozen=True, eq=False)
class EStopMsg(Message):
    """Emergency / safe stop. From the runtime: stop and hold. From the robot: the robot has stopped."""

    reason: int = EStopReason.UNSPECIFIED

    TYPE = MsgType.ESTOP

    def __post_init__(self) -> None:
        super().__post_init__()
        _check_u(int(self.reason), "reason", MAX_U16)
        object.__setattr__(self, "reason", int(self.reason))


def _check_text(text: str) -> None:
    if not isinstance(text, str) or len(text.encode("utf-8")) > MAX_TEXT_BYTES:
        raise ValueError(f"text must be a str of at most {MAX_TEXT_BYTES} UTF-8 bytes, got {text!r:.80}")


@dataclass(frozen=True, eq=False)
class _CodeTextMsg(Message):
    """The payload ERROR and ACK share: an ``ErrorCode`` and a short human-readable text."""

    code: int = ErrorCode.OK
    text: str = ""

    def __post_init__(self) -> None:
        super().__post_init__()
        _check_u(int(self.code), "code", MAX_U16)
        object.__setattr__(self, "code", int(self.code))
        _check_text(self.text)


@dataclass(frozen=True, eq=False)
class ErrorMsg(_CodeTextMsg):
    """An error report (``ErrorCode``) with a short human-readable text."""

    TYPE = MsgType.ERROR


@dataclass(frozen=True, eq=False)
class AckMsg(_CodeTextMsg):
    """Acknowledges a message (``code`` 0 = OK) with a short text."""

    TYPE = MsgType.ACK


@dataclass(frozen=True, eq=False)
class HomeMsg(Message):
    """Return to the home pose and start a new episode; ``seed`` seeds the robot's episode (sim: physics/noise).

    It also clears an e-stop that the runtime sent; an e-stop from the robot side stays until the operator clears it.
    """

    seed: int = 0

    TYPE = MsgType.HOME

    def __post_init__(self) -> None:
        super().__post_init__()
        _check_u(self.seed, "seed", MAX_SEED)


MESSAGE_CLASSES: dict[int, type[Message]] = {
    cls.TYPE: cls for cls in (StateMsg, CommandMsg, HeartbeatMsg, EStopMsg, ErrorMsg, AckMsg, HomeMsg)
}
