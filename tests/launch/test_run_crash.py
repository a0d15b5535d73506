"""``kill -9`` of ``robot-grpo run`` mid-run: its MCAP tick log reads back whole, every tick up to the kill.

The run (and the simulated robot it started) is killed with SIGKILL once its log has grown past a few dozen ticks;
the log then holds no torn or damaged bytes at all (every byte written is read as ticks), its ticks are in order,
and the run's metadata is there. (``tests/deploy/runtime/test_ticklog_crash.py`` shows, against the writer
itself, that every tick whose ``append`` returned before the kill is read back.)
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from deploy.runtime.ticklog import scan_ticklog

ROOT = Path(__file__).resolve().parents[2]
LOG_BYTES_BEFORE_KILL = 60_000  # ~100 ticks
START_TIMEOUT_S = 120.0


@pytest.mark.slow
def test_kill_9_mid_run_leaves_a_log_that_reads_back_whole(tmp_path: Path) -> None:
    args = ["run", "--name", "crash", "--set", f"output={tmp_path}", "--set", "robot.lockstep=true"]
    args += ["--set", "period_s=0.01", "--set", "episodes=200"]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    run = subprocess.Popen([sys.executable, "-m", "launch.cli", *args], cwd=ROOT, env=env, start_new_session=True)
    log = tmp_path / "crash" / "ticks.mcap"
    try:
        deadline = time.monotonic() + START_TIMEOUT_S
        while not (log.is_file() and log.stat().st_size > LOG_BYTES_BEFORE_KILL):
            assert run.poll() is None, "the run ended before the kill"
            assert time.monotonic() < deadline, "the run wrote no ticks"
            time.sleep(0.05)  # poll the log's growth
        os.killpg(run.pid, signal.SIGKILL)  # the run and the simulated robot it started
    finally:
        if run.poll() is None:
            os.killpg(run.pid, signal.SIGKILL)
        run.wait(timeout=60)
    scan = scan_ticklog(log)
    ticks = [r.tick for r in scan.records]
    assert len(ticks) > 50
    assert ticks == sorted(set(ticks))  # in order (a tick that commanded nothing has no record)
    assert scan.corrupt_records == 0 and scan.torn_tails == 0 and scan.skipped_bytes == 0  # every byte read
    assert scan.metadata["run"]["name"] == "crash" and "launch.yaml" in scan.attachments
