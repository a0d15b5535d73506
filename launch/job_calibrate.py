"""``robot-grpo calibrate``: measure delay, gain, noise and workspace through the robot link; write the spec."""

from __future__ import annotations

import json
from dataclasses import asdict
from pathlib import Path
from typing import Any

from launch.job_run import start_robot
from launch.jobs import write_resolved
from launch.schema import LaunchError


def calibrate(config: dict[str, Any], run_dir: Path) -> tuple[Path, dict[str, Any]]:
    """Probe the robot as the launch config says; returns the calibration file and the probe report."""
    from calibration.probe import ProbeConfig, calibrate
    from deploy.robot_spec import save_robot_spec
    from deploy.wire import Link

    try:
        probe = ProbeConfig(
            safe_box_low=tuple(config["safe_box_low"]),
            safe_box_high=tuple(config["safe_box_high"]),
            robot_id=config["robot_id"],
            repeats=config["repeats"],
            state_bounds=config["state_bounds"] or None,
        )
    except ValueError as err:  # an inverted or too thin safe box, bad state bounds: the launch file's keys
        raise LaunchError(f"calibrate settings (safe_box_low, safe_box_high, state_bounds): {err}") from None
    out = Path(config["out"]) if config["out"] else run_dir / f"{config['robot_id']}.yaml"
    port, process = start_robot(config["robot"], seed=0)
    try:
        with Link(port, baudrate=config["robot"]["baudrate"]) as link:
            spec, report = calibrate(link, probe)
    finally:
        if process is not None:
            process.stop()
    path = save_robot_spec(spec, out)
    result = {"calibration_file": str(path), "calibration": spec.to_dict(), "probe": asdict(report)}
    (run_dir / "calibration_report.json").write_text(json.dumps(result, indent=2, default=float))
    return path, result


def main(config: dict[str, Any]) -> int:
    run_dir = Path(config["output"]) / config["name"]
    write_resolved(config, run_dir)
    path, result = calibrate(config, run_dir)
    cal = result["calibration"]
    delay, gain = cal["action_delay"], cal["actuator_gain"]
    print(
        f"delay {delay['steps']} control steps ({delay['ms']:.0f} ms, spread {delay['spread_steps']}), "
        f"gain {gain['per_axis']} (bound {gain['upper_bound']}), "
        f"noise {[round(1e3 * v, 2) for v in cal['observation_noise_std_m']]} mm, "
        f"workspace {cal['workspace']['low']} .. {cal['workspace']['high']} m -> {path}"
    )
    return 0
