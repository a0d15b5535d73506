"""Link over a real pty, loop:// and socket:// (a loopback TCP relay made by the test)."""

from __future__ import annotations

import os
import socket
import threading
import tty

import numpy as np
import pytest

from deploy.wire import CommandMsg, FdTransport, HeartbeatMsg, Link, LinkError, StateMsg

WAIT_S = 2.0  # upper bound for a message to cross a local link; poll returns as soon as it arrives


@pytest.fixture
def pty_pair():
    master, slave = os.openpty()
    tty.setraw(slave)
    robot = Link.from_transport(FdTransport(master), "pty-master")
    runtime = Link(os.ttyname(slave))
    yield robot, runtime
    runtime.close()
    robot.close()
    os.close(slave)


def test_pty_both_directions(pty_pair):
    robot, runtime = pty_pair
    state = StateMsg(1, 0.5, np.linspace(-1, 1, 10), flags=2)
    robot.send(state)
    assert runtime.poll(WAIT_S) == [state]
    cmd = CommandMsg(1, 0.6, np.array([0.1, 0.2, -0.3, 1.0]))
    runtime.send(cmd)
    assert robot.poll(WAIT_S) == [cmd]


def test_pty_noise_is_counted_and_skipped(pty_pair):
    robot, runtime = pty_pair
    robot.send_bytes(b"\x13\x37garbage\x00\xff\xfe")
    state = StateMsg(2, 0.5, np.zeros(10))
    robot.send(state)
    assert runtime.poll(WAIT_S) == [state]
    assert runtime.decoder.error_count >= 1


def test_poll_times_out_empty(pty_pair):
    _, runtime = pty_pair
    assert runtime.poll(0.01) == []


def test_many_frames_in_one_poll(pty_pair):
    robot, runtime = pty_pair
    sent = [HeartbeatMsg(i, float(i)) for i in range(1, 51)]
    for msg in sent:
        robot.send(msg)
    got: list = []
    while len(got) < len(sent):
        batch = runtime.poll(WAIT_S)
        assert batch, "frames lost on the pty"
        got += batch
    assert got == sent


def test_loop_url():
    with Link("loop://") as link:
        msg = CommandMsg(3, 1.0, np.ones(4))
        link.send(msg)
        assert link.poll(WAIT_S) == [msg]


def _relay(server: socket.socket, stop: threading.Event) -> None:
    """Accept two TCP clients and copy bytes between them (a null-modem cable over loopback)."""
    a, _ = server.accept()
    b, _ = server.accept()
    for s in (a, b):
        s.settimeout(0.05)
    while not stop.is_set():
        for src, dst in ((a, b), (b, a)):
            try:
                data = src.recv(65536)
            except TimeoutError:
                continue
            if not data:
                return
            dst.sendall(data)
    a.close()
    b.close()


def test_socket_url():
    server = socket.create_server(("127.0.0.1", 0))
    port = server.getsockname()[1]
    stop = threading.Event()
    relay = threading.Thread(target=_relay, args=(server, stop), daemon=True)
    relay.start()
    try:
        with Link(f"socket://127.0.0.1:{port}") as robot, Link(f"socket://127.0.0.1:{port}") as runtime:
            state = StateMsg(9, 2.0, np.arange(10.0))
            robot.send(state)
            assert runtime.poll(WAIT_S) == [state]
    finally:
        stop.set()
        relay.join(timeout=WAIT_S)
        server.close()


def test_bad_port_raises_link_error():
    with pytest.raises(LinkError, match="cannot open"):
        Link("/dev/does-not-exist-robot")


def test_closed_peer_raises_link_error_on_read():
    master, slave = os.openpty()
    tty.setraw(slave)
    runtime = Link(os.ttyname(slave))
    os.close(slave)
    os.close(master)  # the robot side goes away: the runtime's port now reports a hang-up
    with pytest.raises(LinkError):
        for _ in range(3):
            runtime.poll(0.01)
    runtime.close()


def test_a_port_whose_peer_stops_reading_fails_the_write_after_its_timeout_and_takes_what_fits_before():
    """The runtime writes straight to the port's descriptor; a full buffer waits ``write_timeout_s``, then LinkError."""
    master, slave = os.openpty()
    tty.setraw(slave)
    runtime = Link(os.ttyname(slave), write_timeout_s=0.05)
    frame = CommandMsg(1, 0.0, np.zeros(4))
    sent = 0
    with pytest.raises(LinkError, match="timed out.*stopped reading"):
        for _ in range(100_000):  # the robot side (master) never reads: the pty's buffer fills
            sent += runtime.send(frame)
    assert sent > 0
    robot = Link.from_transport(FdTransport(master), "pty-master")
    assert frame in robot.poll(WAIT_S)  # what fitted before the buffer filled arrives whole
    runtime.close()
    robot.close()
    os.close(slave)
