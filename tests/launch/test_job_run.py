"""launch/job_run.py: what the run job hands the controller for a serial robot."""

from __future__ import annotations

from pathlib import Path

import pytest

import launch.job_run as job_run
from launch.cli import validate_launch

ROOT = Path(__file__).resolve().parents[2]


def test_a_serial_robot_is_opened_at_the_launch_files_baud_rate(monkeypatch, tmp_path: Path):
    """robot.baudrate was validated and then dropped (the port opened at the default 1 Mbit/s)."""
    seen: dict[str, object] = {}

    class RecordedError(Exception):
        pass

    class Recorder:
        def __init__(self, port, *args, **kwargs) -> None:
            seen.update(port=port, **kwargs)

        def run(self):
            raise RecordedError

    monkeypatch.setattr("deploy.runtime.loop.Controller", Recorder)
    goals = tmp_path / "goals.yaml"
    goals.write_text("- [1.3, 0.75, 0.55]\n")
    config = validate_launch(
        {
            "job": "run",
            "name": "baud",
            "package": str(ROOT / "models" / "default"),
            "output": str(tmp_path),
            "goals_file": str(goals),
            "episodes": 1,
            "robot": {"kind": "serial", "port": "loop://", "baudrate": 115_200},
        },
        source="<test>",
    )
    with pytest.raises(RecordedError):
        job_run.run(config, tmp_path / "baud")
    assert seen["port"] == "loop://" and seen["baudrate"] == 115_200
