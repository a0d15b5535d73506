"""``robot-grpo calibrate``: measure delay, noise and workspace through the robot link; write the file."""

from __future__ import annotations

import json
from dataclasses import asdict
from pathlib import Path
from typing import Any

from launch.job_run import start_robot
from launch.jobs import write_resolved


def calibrate(config: dict[str, Any], run_dir: Path) -> tuple[Path, dict[str, Any]]:
    """Probe the robot as the launch config says; returns the calibration file and the probe report."""
    from calibration.probe import ProbeConfig, calibrate
    from calibration.schema import save_calibration
    from deploy.wire import Link

    probe = ProbeConfig(
        safe_box_low=tuple(config["safe_box_low"]),
        safe_box_high=tuple(config["safe_box_high"]),
        robot_id=config["robot_id"],
        repeats=config["repeats"],
    )
    out = Path(config["out"]) if config["out"] else run_dir / f"{config['robot_id']}.yaml"
    port, process = start_robot(config["robot"], seed=0)
    try:
        with Link(port, baudrate=config["robot"]["baudrate"]) as link:
            calibration, report = calibrate(link, probe)
    finally:
        if process is not None:
            process.stop()
    path = save_calibration(calibration, out)
    result = {"calibration_file": str(path), "calibration": calibration.to_dict(), "probe": asdict(report)}
    (run_dir / "calibration_report.json").write_text(json.dumps(result, indent=2, default=float))
    return path, result


def main(config: dict[str, Any]) -> int:
    run_dir = Path(config["output"]) / config["name"]
    write_resolved(config, run_dir)
    path, result = calibrate(config, run_dir)
    cal = result["calibration"]
    delay = cal["action_delay"]
    print(
        f"delay {delay['steps']} control steps ({delay['ms']:.0f} ms, spread {delay['spread_steps']}), "
        f"noise {[round(1e3 * v, 2) for v in cal['observation_noise_std_m']]} mm, "
        f"workspace {cal['workspace']['low']} .. {cal['workspace']['high']} m -> {path}"
    )
    return 0
