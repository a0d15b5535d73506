"""Does this policy package belong on this robot? The startup check of ``robot-grpo run``, before any command.

stdlib only (robot side). The robot spec says what the robot is (measured); the package's manifest says what the
policy was trained for. They must agree on:

- the control period (the policy's history and the spec's delay count control steps of it);
- the command convention (metres per command unit);
- the delay: the robot's measured delay must lie in the delay range the policy was trained on (a k=2 policy on a
  k=6 robot sees only 2 of the 6 commands in flight and reaches for the wrong place).

A mismatch is refused with one line naming both values and the fixes; an explicit override (``robot-grpo run
--set override_compatibility=true``) runs anyway, logged and recorded in the run report.
"""

from __future__ import annotations

from typing import Any

from deploy.robot_spec import RobotSpec

PERIOD_TOLERANCE_S = 1e-9
SCALE_TOLERANCE_M = 1e-9
FIXES = (
    "recalibrate the robot (robot-grpo calibrate), retrain with env.delay_range covering the robot's delay, "
    "or run anyway with --set override_compatibility=true (logged)"
)


class CompatibilityError(ValueError):
    """The robot spec and the policy package do not belong together."""


def mismatches(spec: RobotSpec, manifest: dict[str, Any], package_name: str) -> list[str]:
    """What disagrees between the robot spec and a package manifest (empty when they belong together)."""
    contract = manifest["contract"]
    problems = []
    period = float(contract["control_period_s"])
    if abs(spec.control_period_s - period) > PERIOD_TOLERANCE_S:
        problems.append(
            f"robot {spec.robot_id!r} runs at {spec.control_period_s} s per control step, package {package_name} "
            f"was trained at {period} s"
        )
    scale = float(contract["action_scale_m"])
    if abs(spec.command_scale_m - scale) > SCALE_TOLERANCE_M:
        problems.append(
            f"robot {spec.robot_id!r} moves {spec.command_scale_m} m per command unit, package {package_name} "
            f"commands {scale} m per unit"
        )
    trained = manifest["action_delay_steps"]
    low, high = int(trained["low"]), int(trained["high"])
    robot_low, robot_high = spec.delay_range
    if not (low <= robot_low and robot_high <= high):
        measured = f"{spec.delay_steps} control steps ({spec.delay_ms:.0f} ms)"
        if robot_low != robot_high:
            measured += f", range {robot_low}..{robot_high}"
        problems.append(
            f"robot {spec.robot_id!r} has an action delay of {measured}, package {package_name} was trained for "
            f"{low}..{high} steps"
        )
    return problems


def check_compatibility(
    spec: RobotSpec, manifest: dict[str, Any], package_name: str, override: bool = False
) -> list[str]:
    """Raise ``CompatibilityError`` (one line: both values and the fixes) when the spec and the package disagree;
    with ``override`` return the disagreements instead (the caller logs them and records them in its report)."""
    problems = mismatches(spec, manifest, package_name)
    if problems and not override:
        raise CompatibilityError("; ".join(problems) + f". Fix: {FIXES}")
    return problems
