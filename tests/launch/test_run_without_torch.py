"""`robot-grpo run` on a real port loads the package and talks to the robot without the training side.

The command runs in a fresh interpreter where importing torch, mujoco, gymnasium, stable_baselines3,
robot_grpo or envs raises. The "robot" is pyserial's loop:// (it only echoes our own frames, so no state ever
arrives): the run must get as far as waiting for the robot's first state and fail on the startup timeout - one
line, exit status 2 - not on an import.
"""

from __future__ import annotations

import importlib.util
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _load_import_guard():
    """The runtime tests' import guard, loaded by path (test folders are not packages)."""
    path = ROOT / "tests" / "deploy" / "runtime" / "import_guard.py"
    spec = importlib.util.spec_from_file_location("import_guard", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


_GUARD = _load_import_guard()
FORBID_SOURCE, FORBIDDEN = _GUARD.FORBID_SOURCE, _GUARD.FORBIDDEN
PACKAGE = ROOT / "models" / "default"
SCRIPT = FORBID_SOURCE + textwrap.dedent(
    """
    from launch.cli import main

    try:
        sys.exit(main(sys.argv[2:]))
    except ImportError as err:
        print(f"IMPORT {err}")
        sys.exit(3)
    except Exception as err:
        print(f"STOPPED {type(err).__name__}: {err}")
        sys.exit(4)
    """
)


@pytest.mark.skipif(not (PACKAGE / "manifest.json").is_file(), reason="models/default is absent")
def test_run_on_a_port_needs_no_training_side(tmp_path):
    goals = tmp_path / "goals.yaml"
    goals.write_text("- [1.30, 0.75, 0.55]\n")
    args = [
        "run",
        "--config",
        str(ROOT / "launch" / "run_serial.yaml"),
        "--set",
        "robot.port=loop://",
        "--set",
        f"goals_file={goals}",
        "--set",
        f"package={PACKAGE}",
        "--set",
        f"output={tmp_path}",
        "--set",
        "episodes=1",
    ]
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT, ",".join(FORBIDDEN), *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    out = done.stdout + done.stderr
    assert "IMPORT" not in out, out
    assert done.returncode == 2, out
    assert "robot-grpo: error: no valid state from the robot on loop://" in done.stderr, out
    assert "Traceback" not in out, out
