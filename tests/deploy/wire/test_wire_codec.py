"""Round trips of every wire message (hypothesis) and the decoder's handling of framing edge cases."""

from __future__ import annotations

import struct
import zlib
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from deploy.wire import codec
from deploy.wire.codec import FrameDecoder, decode_body, encode, encode_body
from deploy.wire.messages import (
    HOLD_SEQ,
    MESSAGE_CLASSES,
    SEQ_MAX,
    AckMsg,
    CommandMsg,
    ErrorMsg,
    EStopMsg,
    HeartbeatMsg,
    HomeMsg,
    StateMsg,
    seq_after,
    seq_distance,
    seq_newer,
)

seqs = st.integers(0, 2**32 - 1)
times = st.floats(allow_nan=True, allow_infinity=True)
vectors = hnp.arrays(np.float64, st.integers(0, 255), elements=st.floats(allow_nan=True, allow_infinity=True))
u16 = st.integers(0, 2**16 - 1)
texts = st.text(max_size=60)

messages = st.one_of(
    st.builds(StateMsg, seqs, times, vectors, u16, st.lists(seqs, max_size=8).map(tuple)),
    st.builds(CommandMsg, seqs, times, vectors),
    st.builds(HeartbeatMsg, seqs, times),
    st.builds(EStopMsg, seqs, times, u16),
    st.builds(ErrorMsg, seqs, times, u16, texts),
    st.builds(AckMsg, seqs, times, u16, texts),
    st.builds(HomeMsg, seqs, times, st.integers(0, 2**64 - 1)),
)


@settings(max_examples=300, deadline=None)
@given(messages)
def test_round_trip_is_exact(msg):
    """decode(encode(m)) == m bit for bit: float64 states, NaN payloads and -0.0 survive."""
    frame = encode(msg)
    assert frame[0] == 0 and frame[-1] == 0 and 0 not in frame[1:-1]
    decoder = FrameDecoder()
    (out,) = decoder.feed(frame)
    assert out == msg
    assert type(out) is type(msg)
    assert decoder.error_count == 0


@settings(max_examples=100, deadline=None)
@given(st.lists(messages, max_size=20), st.data())
def test_stream_split_anywhere(msgs, data):
    """A stream of frames fed in arbitrary chunks decodes to the same messages in order."""
    stream = b"".join(encode(m) for m in msgs)
    cuts = sorted(data.draw(st.lists(st.integers(0, len(stream)), max_size=10)))
    decoder = FrameDecoder()
    out = []
    for a, b in zip([0, *cuts], [*cuts, len(stream)], strict=True):
        out += decoder.feed(stream[a:b])
    assert out == msgs
    assert decoder.error_count == 0


def test_every_message_type_has_an_encoder_and_decoder():
    assert set(codec._DECODERS) == set(MESSAGE_CLASSES)
    assert set(codec._ENCODERS) == set(MESSAGE_CLASSES.values())


def test_state_bytes_layout():
    """The documented layout: header (14 B) | flags u16 | m u8 | m x u32 pending | n u8 | n x f64 | crc32."""
    msg = StateMsg(seq=7, t_s=1.5, state=np.array([1.0, -2.0]), flags=3, pending=(5, 6))
    body = encode_body(msg)
    assert body[:14] == struct.pack("<BBId", 1, 1, 7, 1.5)
    assert body[14:17] == struct.pack("<HB", 3, 2)
    assert body[17:25] == struct.pack("<II", 5, 6)
    assert body[25:26] == b"\x02"
    assert body[26:42] == np.array([1.0, -2.0], "<f8").tobytes()
    assert body[42:] == struct.pack("<I", zlib.crc32(body[:42]))
    assert len(body) == 46


@pytest.mark.parametrize(
    ("body", "kind"),
    [
        (b"\x01\x01", "short"),
        (b"\x02" + encode_body(HeartbeatMsg(1, 0.0))[1:], "crc"),  # version byte changed, CRC kept
    ],
)
def test_decode_body_rejects(body, kind):
    with pytest.raises(codec.FrameError) as err:
        decode_body(body)
    assert err.value.kind == kind


def _with_crc(body_without_crc: bytes) -> bytes:
    return body_without_crc + struct.pack("<I", zlib.crc32(body_without_crc))


@pytest.mark.parametrize(
    ("body", "kind"),
    [
        (_with_crc(struct.pack("<BBId", 2, 3, 1, 0.0)), "version"),
        (_with_crc(struct.pack("<BBId", 1, 99, 1, 0.0)), "type"),
        (_with_crc(struct.pack("<BBId", 1, 3, 1, 0.0) + b"x"), "payload"),  # heartbeat with a payload
        (_with_crc(struct.pack("<BBId", 1, 2, 1, 0.0) + b"\x02" + b"\x00" * 8), "payload"),  # 2 floats announced, 1
        (_with_crc(struct.pack("<BBId", 1, 5, 1, 0.0) + struct.pack("<HB", 1, 2) + b"\xff\xfe"), "payload"),
    ],
)
def test_crc_valid_but_wrong_frames_are_counted_by_kind(body, kind):
    from cobs import cobs

    decoder = FrameDecoder()
    assert decoder.feed(b"\x00" + cobs.encode(body) + b"\x00") == []
    assert decoder.errors == {kind: 1}


def test_oversize_run_is_dropped_and_decoding_resumes():
    decoder = FrameDecoder(max_frame_bytes=64)
    good = HeartbeatMsg(3, 0.25)
    assert decoder.feed(b"\x01" * 500) == []
    assert decoder.feed(b"\x01" * 500 + encode(good)) == [good]
    assert decoder.errors == {"oversize": 1}


@pytest.mark.parametrize(
    ("make", "match"),
    [
        (lambda: StateMsg(-1, 0.0, np.zeros(3)), "seq"),
        (lambda: StateMsg(2**32, 0.0, np.zeros(3)), "seq"),
        (lambda: CommandMsg(0, 0.0, np.zeros(256)), "at most 255"),
        (lambda: CommandMsg(0, 0.0, np.zeros((2, 2))), "1-D"),
        (lambda: ErrorMsg(0, 0.0, 1, "x" * 256), "255 UTF-8 bytes"),
        (lambda: StateMsg(0, 0.0, np.zeros(3), pending=(1,) * 256), "at most 255"),
        (lambda: EStopMsg(0, 0.0, 70000), "reason"),
        (lambda: HomeMsg(0, 0.0, -5), "seed"),
    ],
)
def test_invalid_messages_raise_value_error(make, match):
    with pytest.raises(ValueError, match=match):
        make()


def test_seq_newer_wraps():
    assert seq_newer(1, 0)
    assert not seq_newer(0, 0)
    assert not seq_newer(0, 1)
    assert seq_newer(0, 2**32 - 1)  # the ring comparison knows no reserved value (no sender uses 0: seq_after)
    assert seq_newer(1, 2**32 - 1)  # what does follow the last value
    assert seq_newer(5, 2**32 - 3)
    assert not seq_newer(2**31 + 5, 5)  # half the ring away is not newer


def test_sequence_numbers_run_from_one_and_wrap_past_the_uint32_limit_to_one():
    # 0 is never a message's number: in a state's pending list it is HOLD_SEQ, a hold the robot inserted
    assert (HOLD_SEQ, SEQ_MAX) == (0, 2**32 - 1)
    assert [seq_after(0), seq_after(1), seq_after(SEQ_MAX - 1), seq_after(SEQ_MAX)] == [1, 2, SEQ_MAX, 1]
    assert seq_newer(seq_after(SEQ_MAX), SEQ_MAX)


def test_seq_distance_counts_messages_and_the_wrap_as_one():
    assert (seq_distance(5, 5), seq_distance(7, 5)) == (0, 2)
    assert (seq_distance(1, SEQ_MAX), seq_distance(2, SEQ_MAX - 1)) == (1, 3)  # 0 is skipped at the wrap
    for seq in (1, 1000, SEQ_MAX - 1, SEQ_MAX):
        assert seq_distance(seq_after(seq), seq) == 1


def test_the_protocol_document_states_the_numbering_the_code_uses():
    text = (Path(codec.__file__).parent / "PROTOCOL.md").read_text()
    assert "after 2^32 - 1\n    comes 1 again" in text and "0 is never a message's number" in text
    assert "`deploy.wire.seq_after`" in text
    assert "wraps at 2^32" not in text  # the old wording said 2^32 - 1 -> 0
