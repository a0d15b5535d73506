"""Fuzz the streaming decoder with >= 100k random and mutated frames mixed with valid ones.

Checks: no exception escapes, no corrupt frame is accepted (the output is exactly the valid frames, in
order), and every valid frame after garbage is recovered.
"""

from __future__ import annotations

import numpy as np

from deploy.wire.codec import FrameDecoder, encode
from deploy.wire.messages import CommandMsg, ErrorMsg, EStopMsg, HeartbeatMsg, HomeMsg, StateMsg

N_CHUNKS = 120_000  # random + mutated + valid chunks in the stream
SEED = 1234


def _valid(rng: np.random.Generator, seq: int):
    kind = rng.integers(6)
    if kind == 0:
        return StateMsg(seq, float(rng.random()), rng.normal(size=10), int(rng.integers(16)), (seq - 1, seq))
    if kind == 1:
        return CommandMsg(seq, float(rng.random()), rng.uniform(-1, 1, size=4))
    if kind == 2:
        return HeartbeatMsg(seq, float(rng.random()))
    if kind == 3:
        return EStopMsg(seq, float(rng.random()), int(rng.integers(6)))
    if kind == 4:
        return ErrorMsg(seq, float(rng.random()), int(rng.integers(4)), "bad command")
    return HomeMsg(seq, float(rng.random()), int(rng.integers(2**32)))


def _mutate(rng: np.random.Generator, frame: bytes) -> bytes:
    """A frame whose encoded body (between its delimiters) is changed by one of: bit flips, byte substitutions,
    insertion, deletion, truncation. Changing only the delimiters would leave a valid frame, which must be
    accepted, so the body is mutated and re-wrapped."""
    inner = frame[1:-1]
    data = bytearray(inner)
    how = rng.integers(5)
    if how == 0:  # flip 1..8 bits
        for pos in rng.integers(len(data), size=rng.integers(1, 9)):
            data[pos] ^= 1 << int(rng.integers(8))
    elif how == 1:  # substitute 1..4 bytes with different values
        for pos in rng.integers(len(data), size=rng.integers(1, 5)):
            data[pos] = (data[pos] + int(rng.integers(1, 256))) % 256
    elif how == 2:  # insert random non-zero bytes (an inserted 0x00 at either end would just add garbage)
        pos = int(rng.integers(len(data)))
        data[pos:pos] = rng.integers(1, 256, size=rng.integers(1, 8), dtype=np.uint8).tobytes()
    elif how == 3:  # delete bytes
        pos = int(rng.integers(len(data) - 1))
        del data[pos : pos + int(rng.integers(1, 8))]
    else:  # truncate
        data = data[: int(rng.integers(1, len(data)))]
    return b"" if bytes(data) == inner else b"\x00" + bytes(data) + b"\x00"


def test_fuzz_decoder_accepts_exactly_the_valid_frames():
    rng = np.random.default_rng(SEED)
    parts: list[bytes] = []
    expected = []
    seq = 0
    kinds = rng.integers(3, size=N_CHUNKS)  # 0 random bytes, 1 mutated frame, 2 valid frame
    n_mutated = 0
    for kind in kinds:
        seq += 1
        if kind == 0:
            parts.append(rng.integers(256, size=rng.integers(0, 80), dtype=np.uint8).tobytes())
            continue
        msg = _valid(rng, seq)
        frame = encode(msg)
        if kind == 1:
            mutated = _mutate(rng, frame)
            if mutated:
                parts.append(mutated)
                n_mutated += 1
            continue
        parts.append(frame)
        expected.append(msg)
    stream = b"".join(parts)

    decoder = FrameDecoder()
    out = []
    cuts = np.sort(rng.integers(len(stream), size=len(stream) // 512))  # feed in random chunk sizes
    start = 0
    for end in [*cuts.tolist(), len(stream)]:
        out += decoder.feed(stream[start:end])  # any exception fails the test
        start = end

    assert n_mutated > N_CHUNKS // 4
    assert len(out) == len(expected)  # nothing corrupt accepted, nothing valid lost
    assert out == expected
    assert decoder.frames_ok == len(expected)
    assert decoder.error_count > n_mutated // 2  # the garbage was seen and counted, not silently skipped
    assert set(decoder.errors) <= {"oversize", "cobs", "short", "crc", "version", "type", "payload"}


def test_garbage_without_delimiter_before_a_frame_does_not_spoil_it():
    rng = np.random.default_rng(SEED)
    decoder = FrameDecoder()
    msg = CommandMsg(9, 0.5, np.array([0.1, -0.2, 0.3, 0.0]))
    for _ in range(2000):
        garbage = rng.integers(1, 256, size=rng.integers(1, 40), dtype=np.uint8).tobytes()  # no 0x00 in it
        assert decoder.feed(garbage + encode(msg)) == [msg]
