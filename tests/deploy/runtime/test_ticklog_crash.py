"""``kill -9`` of a process writing the tick log: every tick it had appended before the kill is read back.

A child process appends ticks as fast as it can (with the default background fsync, and with segments small
enough that it rotates), printing each tick's number once ``append`` returned. The parent kills it with SIGKILL
at a different point each time and reads the log: every tick the child reported is there, in order, and nothing
is damaged (each tick reached the OS in one ``os.write`` before ``append`` returned; the kill loses no page cache).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from deploy.runtime.ticklog import scan_ticklog

ROOT = Path(__file__).resolve().parents[3]
CHILD = textwrap.dedent(
    """
    import sys
    import numpy as np
    from deploy.runtime.tick_record import TickRecord
    from deploy.runtime.ticklog import TickLogWriter

    path, max_bytes = sys.argv[1], int(sys.argv[2])
    writer = TickLogWriter(path, max_bytes=max_bytes, metadata={"run": {"name": "crash"}})
    rng = np.random.default_rng(0)
    tick = 0
    while True:
        writer.append(TickRecord(0.004 * tick, tick, rng.normal(size=10), rng.normal(size=24).astype(np.float32),
                                 rng.normal(size=3), rng.normal(size=4), rng.normal(size=4), ("clip",), 1e-4, 0.0,
                                 episode_id=tick // 50, state_seq=tick, policy_id="a" * 64))
        print(tick, flush=True)
        tick += 1
    """
)
KILL_AFTER = (1, 37, 203, 650)  # ticks reported before the kill: inside the first segment, and after rotations
SEGMENT_BYTES = 64 << 10


@pytest.mark.parametrize("kill_after", KILL_AFTER)
def test_every_tick_appended_before_kill_9_is_readable(tmp_path, kill_after):
    path = tmp_path / "ticks.mcap"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    child = subprocess.Popen(
        [sys.executable, "-c", CHILD, str(path), str(SEGMENT_BYTES)], stdout=subprocess.PIPE, text=True, env=env
    )
    try:
        reported = -1
        assert child.stdout is not None
        for line in child.stdout:
            reported = int(line)
            if reported + 1 >= kill_after:
                break
        os.kill(child.pid, signal.SIGKILL)  # the child may append a few more ticks before the signal lands
    finally:
        child.kill()
        child.wait(timeout=60)
    assert reported + 1 == kill_after, "the child died before the kill"
    scan = scan_ticklog(path)
    ticks = [r.tick for r in scan.records]
    assert ticks[: reported + 1] == list(range(reported + 1))  # every reported tick, in order
    assert ticks == list(range(len(ticks)))  # and whatever came after them, gapless
    assert scan.corrupt_records == 0 and scan.torn_tails == 0
    assert scan.metadata["run"] == {"name": "crash"}
    if kill_after > 300:
        assert len(scan.files) > 1  # the kill came after rotations
