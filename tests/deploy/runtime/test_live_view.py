"""The live view never waits for a client: one that subscribes and then stalls loses messages, the publisher keeps
going, and the control thread's side (``publish_tick``) stays a queue append. Also: the scene's geometry."""

from __future__ import annotations

import time

import numpy as np
import pytest
from foxglove_client import Received, open_client, read_messages, subscribe_all

from deploy.runtime.live_scene import arrow_orientation, commanded_motion_m
from deploy.runtime.live_view import LiveView
from deploy.runtime.tick_channels import TickEncoder
from deploy.runtime.tick_record import TickRecord

pytest.importorskip("foxglove", reason="the live view needs the [live] extra")

BOX = (np.array([1.05, 0.40, 0.40]), np.array([1.65, 1.10, 0.95]))
TICKS = 30_000  # ~14 MB of channel messages: more than the socket buffers (4 MB at most here) and the backlog hold
BATCH = 100  # ticks queued between drains (fewer than the queue holds: nothing is dropped on our side)
NEVER_S = 3600.0  # the publisher thread's poll: the test drains by hand


def tick(i: int) -> TickRecord:
    state = np.array([1.3, 0.7, 0.5, 0, 0, 0, 0, 0, 0, 0], dtype=np.float64)
    return TickRecord(
        0.04 * i, i, state, np.zeros(24, np.float32), np.array([1.35, 0.75, 0.6]), np.ones(4), np.full(4, 0.3), (),
        1e-4, 0.0, episode_id=0, state_seq=i, policy_id="a" * 64,
    )  # fmt: skip


def test_a_stalled_client_makes_the_server_drop_never_the_publisher_wait(caplog: pytest.LogCaptureFixture):
    view = LiveView(BOX, (0, 3), [0.05, 0.05, 0.05], port=0, scene_hz=30.0, backlog=64, poll_s=NEVER_S)
    record = tick(0)
    payloads = TickEncoder().encode(record)
    per_tick = sum(len(p) for p in payloads)
    drains = []
    received = Received()
    with open_client(view.port, timeout_s=30.0, receive_buffer_bytes=4096) as ws:
        topics = subscribe_all(ws, received, timeout_s=30.0)
        while not view.subscribed():  # the server has taken the subscription
            time.sleep(0.01)
        for _ in range(TICKS // BATCH):
            for _ in range(BATCH):
                view.publish_tick(record, payloads, time.time_ns())
            t0 = time.perf_counter()
            view.drain()  # what the publisher thread does: hand the bytes to the server
            drains.append(time.perf_counter() - t0)
        view.close()  # the server closes the connection: the client then reads what reached it
        # the stalled client cannot take the close: close() does not wait for it (it held the run's exit 48 s)
        assert "did not take the close" in caplog.text
        read_messages(ws, received, topics, until=lambda r: False)
    stats = view.stats.summary()
    assert TICKS * per_tick > 2 * (4 << 20)  # the stall is real: far more than the socket buffers hold
    assert stats["published"] == stats["queued"] == TICKS and stats["dropped"] == 0 and stats["errors"] == 0
    assert 0 < received.raw_count < TICKS * len(payloads) / 3  # the server dropped what the client could not take
    # the publisher never waited for the client: the last drains took as long as the first ones
    first, last = np.median(drains[:20]), np.median(drains[-20:])
    assert last < 3 * first + 1e-3, (first, last)
    assert max(drains) < 1.0
    assert stats["enqueue_s_p99"] < 1e-4  # the control thread's side: a queue append


def test_a_full_queue_drops_its_oldest_and_counts_it():
    view = LiveView(BOX, (0, 3), [0.05] * 3, port=0, queue_ticks=4, poll_s=NEVER_S)
    try:
        record = tick(0)
        payloads = TickEncoder().encode(record)
        for i in range(10):
            view.publish_tick(tick(i), payloads, i)
        assert view.stats.dropped == 6 and view.queued_ticks() == [6, 7, 8, 9]
    finally:
        view.close()
    assert view.stats.published == 4


def test_a_wrong_setting_is_named():
    with pytest.raises(ValueError, match="scene_hz"):
        LiveView(BOX, (0, 3), [0.05] * 3, port=0, scene_hz=0.0)


@pytest.mark.parametrize("direction", [(1, 0, 0), (-1, 0, 0), (0, 1, 0), (0, 0, -1), (0.3, -0.2, 0.9)])
def test_the_arrow_turns_plus_x_onto_the_commanded_motion(direction):
    x, y, z, w = arrow_orientation(np.array(direction, dtype=float))
    q = np.array([x, y, z])
    v = np.array([1.0, 0.0, 0.0])
    rotated = v + 2 * w * np.cross(q, v) + 2 * np.cross(q, np.cross(q, v))  # q v q*
    d = np.asarray(direction, dtype=float)
    np.testing.assert_allclose(rotated, d / np.linalg.norm(d), atol=1e-12)
    assert np.isclose(x * x + y * y + z * z + w * w, 1.0)


def test_the_commanded_motion_is_command_times_metres_per_unit():
    gain = np.array([0.05, 0.05, 0.04])
    np.testing.assert_allclose(commanded_motion_m(np.array([1.0, -0.5, 0.2, 0.9]), 3, gain), [0.05, -0.025, 0.008])
    assert not commanded_motion_m(np.zeros(0), 3, gain).any()  # a tick that sent nothing
