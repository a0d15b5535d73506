"""One tick log record: what the control loop did in one tick, and its payload bytes (``deploy.runtime.ticklog``
frames and files them).

Payload (little endian; record format version 2)::

    f64 t_s | i64 tick | i64 episode_id | i64 state_seq | f64 latency_s | f64 jitter_s | u8 stop
    | 5 arrays (state f64, obs_flat f32, goal f64, proposed f64, sent f64), each u16 n + n values
    | u8 reason count, then per reason u8 length + UTF-8 bytes
    | u8 length + ASCII policy_id (version 2; a version 1 record ends before it: policy_id "")

No pickle: struct-packed numbers and short strings.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

import numpy as np

FORMAT_VERSION = 2
READABLE_VERSIONS = (1, 2)  # version 1: no policy_id
EMPTY = np.zeros(0)  # an absent array of a TickRecord: a held tick's observation, no episode's goal
NO_EPISODE = -1  # episode_id of ticks outside an episode (connect, hold, safe stop)

_SCALARS = struct.Struct("<dqqqddB")
_COUNT16 = struct.Struct("<H")
_ARRAYS: tuple[tuple[str, type], ...] = (
    ("state", np.float64),
    ("obs_flat", np.float32),
    ("goal", np.float64),
    ("proposed", np.float64),
    ("sent", np.float64),
)
ARRAY_FIELDS = tuple(name for name, _ in _ARRAYS)
_MAX_ARRAY = 0xFFFF
_MAX_REASON = 0xFF
MAX_POLICY_ID_BYTES = 0xFF


@dataclass(eq=False)
class TickRecord:
    """One control tick. Units: seconds, metres, command units.

    :param t_s: time of the tick (seconds, the loop's monotonic clock).
    :param tick: tick counter since the loop started.
    :param state: robot state vector from the state message (float64, contract order).
    :param obs_flat: the flat observation given to the policy (float32).
    :param goal: the desired goal (metres).
    :param proposed: the policy's action before the safety filter.
    :param sent: the action sent to the robot.
    :param reasons: the safety filter's interventions this tick.
    :param latency_s: state frame in -> command frame out (seconds).
    :param jitter_s: tick start minus its deadline (seconds).
    :param episode_id: the episode the tick belongs to (``NO_EPISODE`` outside one).
    :param state_seq: sequence number of the state message used (-1: none).
    :param stop: True on the tick that triggered a safe stop.
    :param policy_id: the policy asked this tick (its package's ``manifest_sha256``); "" when no policy was asked
        (hold, homing, a stale state) or the controller was given a bare backend without an id.
    """

    t_s: float
    tick: int
    state: np.ndarray
    obs_flat: np.ndarray
    goal: np.ndarray
    proposed: np.ndarray
    sent: np.ndarray
    reasons: tuple[str, ...]
    latency_s: float
    jitter_s: float
    episode_id: int = NO_EPISODE
    state_seq: int = -1
    stop: bool = False
    policy_id: str = ""

    def encode(self) -> bytes:
        """The payload bytes (see the module docstring)."""
        parts = [
            _SCALARS.pack(
                float(self.t_s),
                int(self.tick),
                int(self.episode_id),
                int(self.state_seq),
                float(self.latency_s),
                float(self.jitter_s),
                1 if self.stop else 0,
            )
        ]
        for name, dtype in _ARRAYS:
            values = np.ascontiguousarray(getattr(self, name), dtype=dtype).reshape(-1)
            if values.size > _MAX_ARRAY:
                raise ValueError(f"TickRecord.{name} has {values.size} values; the format holds at most {_MAX_ARRAY}")
            parts.append(_COUNT16.pack(values.size))
            parts.append(values.tobytes())
        reasons = [r.encode("utf-8") for r in self.reasons]
        if len(reasons) > _MAX_REASON or any(len(r) > _MAX_REASON for r in reasons):
            raise ValueError(f"at most {_MAX_REASON} reasons of at most {_MAX_REASON} bytes each, got {self.reasons}")
        parts.append(bytes([len(reasons)]))
        for r in reasons:
            parts.append(bytes([len(r)]))
            parts.append(r)
        policy_id = check_policy_id(self.policy_id).encode("ascii")
        parts.append(bytes([len(policy_id)]))
        parts.append(policy_id)
        return b"".join(parts)

    @classmethod
    def decode(cls, payload: bytes, version: int = FORMAT_VERSION) -> TickRecord:
        """Parse a payload of format ``version``; raises ValueError if it is malformed."""
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
                policy_id = check_policy_id(raw_id.decode("ascii"))  # a CRC-valid record of junk is refused
                offset += 1 + size
        except (struct.error, IndexError, UnicodeDecodeError) as err:
            raise ValueError(f"malformed tick record: {err}") from None
        if offset != len(payload):
            raise ValueError(f"malformed tick record: {len(payload) - offset} trailing bytes")
        return cls(
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


def check_policy_id(policy_id: str) -> str:
    """``policy_id`` if the format can hold it (printable ASCII, at most ``MAX_POLICY_ID_BYTES``), else ValueError."""
    if (
        not isinstance(policy_id, str)
        or len(policy_id) > MAX_POLICY_ID_BYTES
        or not (policy_id.isascii() and policy_id.isprintable())
    ):
        raise ValueError(
            f"a policy id must be printable ASCII of at most {MAX_POLICY_ID_BYTES} characters (a package's "
            f"manifest_sha256), got {policy_id!r}"
        )
    return policy_id
