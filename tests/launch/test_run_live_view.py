"""``robot-grpo run`` with the live view: a Foxglove WebSocket client on loopback receives the run's state,
command, transitions and 3D scene; a client that connects and never reads changes nothing in the loop.

The run is a separate process (``python -m launch.cli run``, the simulated robot on a pty); the client is this
test process (the ``websockets`` package).
"""

from __future__ import annotations

import importlib.util
import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from deploy.runtime.ticklog import scan_ticklog

ROOT = Path(__file__).resolve().parents[2]


def _load_client():
    """The runtime tests' Foxglove client, loaded by path (test folders are not packages)."""
    spec = importlib.util.spec_from_file_location("foxglove_client", ROOT / "tests/deploy/runtime/foxglove_client.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("foxglove_client", module)  # its dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


_CLIENT = _load_client()
Received, open_client, read_messages, subscribe_all = (
    _CLIENT.Received,
    _CLIENT.open_client,
    _CLIENT.read_messages,
    _CLIENT.subscribe_all,
)
CONNECT_TIMEOUT_S = 120.0  # the run loads the package and starts the simulated robot first
RUN_TIMEOUT_S = 300.0
pytest.importorskip("foxglove", reason="the live view needs the [live] extra")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_run(tmp_path: Path, name: str, port: int, *settings: str) -> subprocess.Popen[str]:
    args = ["run", "--name", name, "--set", f"output={tmp_path}", "--set", "live.enabled=true"]
    args += ["--set", f"live.port={port}"]
    for setting in settings:
        args += ["--set", setting]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.Popen([sys.executable, "-m", "launch.cli", *args], cwd=ROOT, env=env, text=True)


def finish(run: subprocess.Popen[str]) -> None:
    try:
        assert run.wait(timeout=RUN_TIMEOUT_S) == 0
    finally:
        run.kill()
        run.wait()


def test_a_client_on_loopback_receives_state_command_transitions_and_the_scene(tmp_path: Path) -> None:
    port = free_port()
    run = start_run(tmp_path, "live", port, "robot.lockstep=true", "period_s=0.02", "episodes=6", "episode_steps=25")
    try:
        received = Received()
        wanted = ("/robot/state", "/command", "/transitions", "/scene")

        def enough(r: Received) -> bool:
            return all(len(r.messages.get(t, [])) >= 3 for t in wanted)

        with open_client(port, CONNECT_TIMEOUT_S) as ws:
            topics = subscribe_all(ws, received, CONNECT_TIMEOUT_S)
            read_messages(ws, received, topics, enough)
    finally:
        finish(run)
    assert enough(received), {t: len(m) for t, m in received.messages.items()}
    assert {"/robot/state", "/check/verdict", "/policy/proposal", "/command", "/timing"} <= set(received.channels)
    states, commands = received.messages["/robot/state"], received.messages["/command"]
    assert all(len(s.state) == 10 and np.all(np.isfinite(s.state)) for s in states)
    assert all(len(c.sent) == 4 for c in commands)
    assert {s.tick for s in states} & {c.tick for c in commands}  # the same ticks on both channels
    assert all(
        t.target in ("homing", "run", "hold", "wait_fresh", "done", "safe_stop")
        for t in received.messages["/transitions"]
    )
    scene = received.messages["/scene"][-1]
    assert {e.id for e in scene.entities} >= {"workspace", "gripper"}
    # the tick log of the same run holds what the client saw
    scan = scan_ticklog(tmp_path / "live" / "ticks.mcap")
    by_tick = {r.tick: r for r in scan.records}
    for state in states:
        np.testing.assert_array_equal(by_tick[state.tick].state, np.asarray(state.state))
    assert scan.metadata["run"]["name"] == "live" and "robot_spec.yaml" in scan.attachments
    report = json.loads((tmp_path / "live" / "run_report.json").read_text())
    assert report["live"]["url"] == f"ws://127.0.0.1:{port}" and report["live"]["errors"] == 0


STALL_RUN = ("robot.lockstep=true", "period_s=0.02", "episodes=12", "episode_steps=50", "live.backlog=32")


@pytest.mark.slow
def test_a_client_that_stalls_changes_nothing_in_the_loop(tmp_path: Path) -> None:
    """The client subscribes to every channel, then never reads (its socket buffer is small). The control
    thread's cost of publishing stays at microseconds, the view's own queue drops nothing (its publisher thread
    never blocked), and the tick timing matches a run of the same settings with no client, side by side on this
    machine. (At 50 Hz for ~650 ticks the kernel's socket buffers absorb the stall; the server dropping what a
    stalled client cannot take is shown with 10 MB of ticks in tests/deploy/runtime/test_live_view.py.)"""
    quiet_port, stalled_port = free_port(), free_port()
    quiet = start_run(tmp_path, "quiet", quiet_port, *STALL_RUN)
    finish(quiet)
    run = start_run(tmp_path, "stalled", stalled_port, *STALL_RUN)
    try:
        received = Received()
        with open_client(stalled_port, CONNECT_TIMEOUT_S, receive_buffer_bytes=4096) as ws:
            topics = subscribe_all(ws, received, CONNECT_TIMEOUT_S)
            assert run.wait(timeout=RUN_TIMEOUT_S) == 0  # meanwhile the client reads nothing (max_queue=1)
            read_messages(ws, received, topics, until=lambda r: False)  # now drain what reached it, until closed
    finally:
        finish(run)
    stalled = json.loads((tmp_path / "stalled" / "run_report.json").read_text())
    baseline = json.loads((tmp_path / "quiet" / "run_report.json").read_text())
    live = stalled["live"]
    assert received.raw_count > 0
    assert live["dropped"] == 0 and live["errors"] == 0 and live["published"] == live["queued"]
    assert live["enqueue_s_p99"] < 2e-4 and live["enqueue_s_max"] < 0.1  # a blocked publish would never return
    assert stalled["episodes"] == baseline["episodes"] == 12
    t, b = stalled["timing"], baseline["timing"]
    # a shared machine's load moves both runs' tails: the stalled run may not be much worse than the quiet one
    assert t["latency_s_p99"] <= 2.0 * b["latency_s_p99"] + 1e-3, (t, b)
    assert t["overruns"] <= 2 * b["overruns"] + 5, (t, b)
