"""A small Foxglove WebSocket client for the live view's tests (the ``websockets`` package, loopback only).

Speaks the protocol's subset the tests need: read ``serverInfo`` and ``advertise`` (text), ``subscribe`` to every
advertised channel, and read message data (binary: opcode 0x01 | u32 subscription id | u64 log time ns |
payload), decoding protobuf payloads with the schema each channel advertised.
"""

from __future__ import annotations

import base64
import json
import socket
import struct
import time
from dataclasses import dataclass, field
from typing import Any

from websockets.exceptions import ConnectionClosed
from websockets.sync.client import ClientConnection, connect

from deploy.runtime.tick_channels import message_class

SUBPROTOCOL = "foxglove.sdk.v1"
MESSAGE_DATA = 0x01
_DATA_HEAD = struct.Struct("<BIQ")


@dataclass
class Received:
    """What a client got: the advertised channels by topic, and the decoded messages per topic."""

    channels: dict[str, dict[str, Any]] = field(default_factory=dict)
    messages: dict[str, list[Any]] = field(default_factory=dict)
    raw_count: int = 0


def open_client(port: int, timeout_s: float, receive_buffer_bytes: int | None = None) -> ClientConnection:
    """Connect to ``ws://127.0.0.1:port``, retrying until the server is up or ``timeout_s`` passes.
    ``receive_buffer_bytes``: a small socket receive buffer (a client that stalls then stalls the sender soon)."""
    deadline = time.monotonic() + timeout_s
    while True:
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        if receive_buffer_bytes is not None:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, receive_buffer_bytes)
        try:
            sock.connect(("127.0.0.1", port))
            # max_queue=1: the client library stops reading the socket once one message waits unread
            return connect(f"ws://127.0.0.1:{port}", sock=sock, subprotocols=[SUBPROTOCOL], max_queue=1, max_size=None)
        except OSError:
            sock.close()
            if time.monotonic() > deadline:
                raise
            time.sleep(0.05)  # the server is not listening yet: poll again


def subscribe_all(ws: ClientConnection, received: Received, timeout_s: float) -> dict[int, str]:
    """Read until the channels are advertised, subscribe to all; returns subscription id -> topic."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        message = ws.recv(timeout=max(deadline - time.monotonic(), 0.01))
        if isinstance(message, str) and json.loads(message).get("op") == "advertise":
            for channel in json.loads(message)["channels"]:
                received.channels[channel["topic"]] = channel
            break
    else:
        raise TimeoutError("the server advertised no channels")
    topics = sorted(received.channels)
    subscriptions = [{"id": i + 1, "channelId": received.channels[t]["id"]} for i, t in enumerate(topics)]
    ws.send(json.dumps({"op": "subscribe", "subscriptions": subscriptions}))
    return {i + 1: t for i, t in enumerate(topics)}


def decode(channel: dict[str, Any], payload: bytes) -> Any:
    """A protobuf payload decoded with its channel's advertised schema."""
    schema = base64.b64decode(channel["schema"])
    return message_class(channel["schemaName"], schema).FromString(payload)


def read_messages(ws: ClientConnection, received: Received, topics: dict[int, str], until: Any) -> None:
    """Read message data into ``received`` until ``until(received)`` is true or the server closes."""
    try:
        while not until(received):
            message = ws.recv(timeout=30.0)
            if isinstance(message, bytes) and message[0] == MESSAGE_DATA:
                _, subscription, _ = _DATA_HEAD.unpack_from(message)
                topic = topics[subscription]
                received.raw_count += 1
                payload = message[_DATA_HEAD.size :]
                received.messages.setdefault(topic, []).append(decode(received.channels[topic], payload))
    except (ConnectionClosed, TimeoutError):
        return
