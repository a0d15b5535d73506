"""The live view: a run served over the Foxglove WebSocket protocol (``foxglove-sdk``, the [live] extra).

It publishes what the tick log writes, on the same channels with the same protobuf schemas (the bytes the log
encoded, not encoded again), the state machine's transitions, and a 3D scene (``/scene``: workspace box, goal,
gripper, position bound, commanded motion; ``live_scene``). Off by default; bound to loopback unless the launch
file says otherwise.

It must never block or delay the control tick. ``publish_tick`` runs on the control thread, after the tick's
command went out (``TickLogWriter.append``), and only appends the tick to a bounded queue (when the queue is full
the oldest tick is dropped and counted: a client that cannot keep up sees a thinned stream, the loop never
waits). A publisher thread drains the queue every ``poll_s``: it hands the bytes the log encoded to the SDK and
builds the scene at most ``scene_hz`` times a second (about 30 us), letting go of the interpreter lock between
ticks so the control thread never waits behind more than one of them; the SDK's server queues them per client
(``backlog`` messages; a client that does not read loses its oldest) and sends them from its own threads, outside
Python. Nothing is published on a channel no client subscribed to, and an error in the view is logged once and
counted, never raised into the loop. What ``publish_tick`` costs the control thread is measured here (``stats``),
by a test with a client that stalls, and by ``benchmarks/control_loop.py`` (a telemetry-on row).
"""

from __future__ import annotations

import logging
import math
import threading
import time
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from deploy.runtime.live_scene import SceneBuilder
from deploy.runtime.tick_channels import MESSAGE_ENCODING, SCHEMA_ENCODING, TICK_SCHEMAS, TRANSITION_SCHEMA
from deploy.runtime.tick_record import TickRecord

logger = logging.getLogger(__name__)

SCENE_TOPIC = "/scene"
DEFAULT_BACKLOG = 1024  # messages the server queues per client before the oldest are dropped (the SDK's default)
DEFAULT_QUEUE_TICKS = 256  # ticks queued for the publisher thread before the oldest is dropped
RECENT_SAMPLES = 100_000  # enqueue times kept for the percentiles (a long run's memory stays bounded)
DEFAULT_POLL_S = 0.005  # the publisher thread drains the queue this often (seconds): the view lags by at most this
# seconds close() waits for the server to stop: it waits for every client to take the close, and a client that
# stalled (a viewer whose network went) held the runtime's exit for 48 s; the server then stops in the background
SERVER_STOP_WAIT_S = 2.0
LOOPBACK_HOSTS = ("127.0.0.1", "localhost", "::1")
SERVER_NAME = "robot-grpo"
LIVE_EXTRA_HINT = "the live view needs the foxglove-sdk package: pip install 'robot-grpo[live]'"


class LiveViewUnavailableError(RuntimeError):
    """The live view was asked for but the Foxglove SDK is not installed (the [live] extra)."""


@dataclass
class PublishStats:
    """What the view did: ticks queued, dropped (queue full), published, scenes built, errors; and how long
    ``publish_tick`` held the control thread (seconds; percentiles over the latest ``RECENT_SAMPLES``)."""

    enqueue_s: deque[float] = field(default_factory=lambda: deque(maxlen=RECENT_SAMPLES))  # the latest ones
    enqueue_max_s: float = 0.0  # over the whole run
    queued: int = 0
    dropped: int = 0
    published: int = 0
    scenes: int = 0
    errors: int = 0

    def summary(self) -> dict[str, float]:
        d = np.asarray(self.enqueue_s) if self.enqueue_s else np.zeros(1)
        counts = ("queued", "dropped", "published", "scenes", "errors")
        return {
            **{name: float(getattr(self, name)) for name in counts},
            "enqueue_s_p50": float(np.percentile(d, 50)),
            "enqueue_s_p99": float(np.percentile(d, 99)),
            "enqueue_s_max": self.enqueue_max_s,
        }


class LiveView:
    """A Foxglove WebSocket server publishing the tick log's channels and a 3D scene (see the module docstring).

    :param box: the workspace (low, high corners, metres).
    :param position_slice: (start, stop) of the gripper position in the robot state.
    :param gain_m: metres moved per unit command, per axis (the arrow of the commanded motion).
    :param host: address to bind (default loopback); anything else is logged as a warning.
    :param port: TCP port (0: any free one; ``port`` tells which).
    :param scene_hz: most scene updates per second.
    :param queue_ticks: ticks the queue holds before the oldest is dropped.
    :param backlog: messages the server queues per client before the client's oldest are dropped.
    :param poll_s: how often the publisher thread drains the queue (seconds).
    """

    def __init__(
        self,
        box: tuple[Any, Any],
        position_slice: tuple[int, int],
        gain_m: Sequence[float],
        host: str = "127.0.0.1",
        port: int = 8765,
        scene_hz: float = 30.0,
        queue_ticks: int = DEFAULT_QUEUE_TICKS,
        backlog: int = DEFAULT_BACKLOG,
        poll_s: float = DEFAULT_POLL_S,
    ) -> None:
        try:
            import foxglove
            from foxglove import messages
        except ImportError:
            raise LiveViewUnavailableError(LIVE_EXTRA_HINT) from None
        if not scene_hz > 0 or not poll_s > 0 or queue_ticks < 1:
            raise ValueError(
                f"scene_hz and poll_s must be > 0 and queue_ticks >= 1, got {scene_hz} Hz, {poll_s} s, {queue_ticks}"
            )
        if host not in LOOPBACK_HOSTS:
            logger.warning("live view: serving on %s: anyone who can reach this address can watch the run", host)
        self.stats = PublishStats()
        self._queue: deque[tuple[TickRecord | None, Sequence[bytes], int]] = deque(maxlen=queue_ticks)
        self._scene_interval_s = 1.0 / scene_hz
        self._poll_s = poll_s
        self._next_scene_t = -math.inf
        self._context = foxglove.Context()
        self._channels = [self._channel(foxglove, s.topic, s.schema_name, s.schema_data) for s in TICK_SCHEMAS]
        t = TRANSITION_SCHEMA
        self._transitions = self._channel(foxglove, t.topic, t.schema_name, t.schema_data)
        self._scene_channel = foxglove.channels.SceneUpdateChannel(SCENE_TOPIC, context=self._context)
        self._scene = SceneBuilder(messages, box, position_slice, np.asarray(gain_m, dtype=np.float64))
        self._server = foxglove.start_server(
            name=SERVER_NAME, host=host, port=port, context=self._context, message_backlog_size=backlog
        )
        self.host = host
        self.port = int(self._server.port)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._drain_loop, name="live-view", daemon=True)
        self._thread.start()
        logger.info("live view: ws://%s:%d (in Foxglove: open connection, Foxglove WebSocket)", host, self.port)

    def _channel(self, foxglove: Any, topic: str, schema_name: str, schema_data: bytes) -> Any:
        schema = foxglove.Schema(name=schema_name, encoding=SCHEMA_ENCODING, data=schema_data)
        return foxglove.Channel(topic, schema=schema, message_encoding=MESSAGE_ENCODING, context=self._context)

    # The control thread ----------------------------------------------------------------------------------------
    def publish_tick(self, record: TickRecord, payloads: Sequence[bytes], log_time_ns: int) -> None:
        """Queue one tick's channel payloads for the publisher thread (O(1); a full queue drops its oldest)."""
        start = time.perf_counter()
        if len(self._queue) == self._queue.maxlen:
            self.stats.dropped += 1
        self._queue.append((record, payloads, log_time_ns))
        self.stats.queued += 1
        took = time.perf_counter() - start
        self.stats.enqueue_s.append(took)
        self.stats.enqueue_max_s = max(self.stats.enqueue_max_s, took)

    def publish_transition(self, payload: bytes, log_time_ns: int) -> None:
        """Queue one state machine transition (as ``publish_tick``)."""
        if len(self._queue) == self._queue.maxlen:
            self.stats.dropped += 1
        self._queue.append((None, (payload,), log_time_ns))

    def subscribed(self) -> bool:
        """A client subscribed to the tick channels (until then, publishing costs nothing)."""
        return any(channel.has_sinks() for channel in self._channels)

    def queued_ticks(self) -> list[int]:
        """The ticks waiting for the publisher thread, oldest first."""
        return [record.tick for record, _, _ in list(self._queue) if record is not None]

    # The publisher thread --------------------------------------------------------------------------------------
    def _drain_loop(self) -> None:
        while not self._stop.wait(self._poll_s):
            self.drain()
        self.drain()

    def drain(self) -> None:
        """Publish everything queued (the publisher thread calls it; never raises). Between items it lets go of the
        interpreter lock, so a control thread that woke up waits at most one item's work (tens of microseconds)."""
        while self._queue:
            time.sleep(0)  # releases the GIL: the control thread, if it wants it, runs first
            record, payloads, log_time_ns = self._queue.popleft()
            try:
                if record is None:
                    self._log(self._transitions, payloads[0], log_time_ns)
                    continue
                for channel, payload in zip(self._channels, payloads, strict=True):
                    self._log(channel, payload, log_time_ns)
                now = time.monotonic()
                if now >= self._next_scene_t and self._scene_channel.has_sinks():
                    self._next_scene_t = now + self._scene_interval_s
                    self._scene_channel.log(self._scene.update(record), log_time=log_time_ns)
                    self.stats.scenes += 1
                self.stats.published += 1
            except Exception as err:  # the view must never take the run down: count, log once
                if not self.stats.errors:
                    logger.error("live view: publishing failed (%s); the run goes on, failures are counted", err)
                self.stats.errors += 1

    @staticmethod
    def _log(channel: Any, payload: bytes, log_time_ns: int) -> None:
        if channel.has_sinks():  # a channel no client subscribed to costs nothing more
            channel.log(payload, log_time=log_time_ns)

    def close(self) -> None:
        """Publish what is queued, stop the publisher thread and the server (clients see the connection close).
        Closing twice is harmless."""
        if self._stop.is_set():
            return
        self._stop.set()
        self._thread.join()
        stopper = threading.Thread(target=self._server.stop, name="live-view-stop", daemon=True)
        stopper.start()
        stopper.join(SERVER_STOP_WAIT_S)
        if stopper.is_alive():
            logger.warning(
                "live view: a client did not take the close within %.1f s (stalled?); the server stops when it "
                "goes, the run does not wait for it",
                SERVER_STOP_WAIT_S,
            )
