"""Calibrate a robot over its serial link and write ``calibration/<robot_id>.yaml`` in the current folder.

    python -m calibration --port /dev/ttyUSB0 --robot-id fetch_lab1 \\
        --safe-box-low 1.05 0.40 0.40 --safe-box-high 1.65 1.10 0.95 [--repeats 5] [--out FILE]

The simulated robot is started by the ``robot-grpo calibrate`` launch job (it needs MuJoCo; this module runs
on the robot side and does not import it). Exit status: 0 written, 2 aborted (robot left holding), 1 failed.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from calibration.probe import ProbeConfig, calibrate
from calibration.probe_session import CalibrationError, ProbeAbortError
from deploy.robot_spec import RobotSpecError, save_robot_spec
from deploy.wire import DEFAULT_BAUDRATE, Link, LinkError

EXIT_ABORTED = 2
EXIT_FAILED = 1


def run_calibration(
    port: str, config: ProbeConfig, out: str | Path | None = None, baudrate: int = DEFAULT_BAUDRATE
) -> Path:
    """Open ``port``, run the probe, save the file (default ``calibration/<robot_id>.yaml`` under the current folder:
    an output, so never inside the installed package); returns its path."""
    path = Path(out) if out else Path("calibration") / f"{config.robot_id}.yaml"
    with Link(port, baudrate=baudrate) as link:
        spec, _ = calibrate(link, config)
    return save_robot_spec(spec, path)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m calibration", description=__doc__.splitlines()[0])
    parser.add_argument("--port", required=True, help="serial port or pyserial URL of the robot link")
    parser.add_argument("--robot-id", required=True)
    parser.add_argument("--safe-box-low", type=float, nargs=3, required=True, metavar=("X", "Y", "Z"))
    parser.add_argument("--safe-box-high", type=float, nargs=3, required=True, metavar=("X", "Y", "Z"))
    parser.add_argument("--repeats", type=int, default=5, help="delay measurements")
    parser.add_argument("--baudrate", type=int, default=DEFAULT_BAUDRATE, help="serial line rate, bit/s")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", default=None, help="file to write (default ./calibration/<robot-id>.yaml)")
    args = parser.parse_args(argv)
    try:
        config = ProbeConfig(
            safe_box_low=tuple(args.safe_box_low),
            safe_box_high=tuple(args.safe_box_high),
            robot_id=args.robot_id,
            repeats=args.repeats,
            seed=args.seed,
        )
        path = run_calibration(args.port, config, args.out, args.baudrate)
    except ProbeAbortError as err:
        print(err, file=sys.stderr)
        return EXIT_ABORTED
    except (CalibrationError, RobotSpecError, LinkError, ValueError) as err:
        print(f"calibration failed: {err}", file=sys.stderr)
        return EXIT_FAILED
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
