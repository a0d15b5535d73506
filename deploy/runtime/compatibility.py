"""Does this policy package belong on this robot? The startup check of ``robot-grpo run``, before any command.

stdlib only (robot side). The robot spec says what the robot is (measured); the package's contract and manifest
say what the policy was trained for. They must agree on:

- the control period (the policy's history and the spec's delay count control steps of it);
- the command convention (metres per command unit);
- the block: a robot whose spec has a ``block_tracker`` sends the block's position in its state, so its packages must
  read one (contract format 2, ``block_slice``), and a package that reads a block needs a robot that sends one
  (``BLOCK_TRACKER_MISSING``, ``BLOCK_NOT_READ``: named in the refusal);
- the delay: the robot's measured delay must lie in the delay range the policy was trained on (a k=2 policy on a
  k=6 robot sees only 2 of the 6 commands in flight and reaches for the wrong place).

A mismatch is refused with one line naming both values and the fixes; an explicit override (``robot-grpo run
--set override_compatibility=true``) runs anyway, logged and recorded in the run report. The first two are the
convention the safety filter needs as well (``SafetyLimits.from_spec`` refuses them, override or not).
"""

from __future__ import annotations

from deploy.contract import ObservationContract
from deploy.robot_spec import RobotSpec

MATCH_TOLERANCE = 1e-9  # seconds and metres: the period and the command scale must be the same number
FIXES = (
    "recalibrate the robot (robot-grpo calibrate), retrain with env.delay_range covering the robot's delay, "
    "or run anyway with --set override_compatibility=true (logged)"
)


BLOCK_TRACKER_MISSING = "block_tracker_missing"  # a push package on a robot that reports no block
BLOCK_NOT_READ = "block_not_read"  # a package without a block on a robot that reports one (another state layout)


BLOCK_FIXES = (
    "run a push package on a robot whose spec has a block_tracker (the push cell: calibration/sim_fetch_push.yaml) and "
    "a reach package on one without (the override cannot help: the safety filter refuses another state layout)"
)


class CompatibilityError(ValueError):
    """The robot spec and the policy package do not belong together."""


def block_mismatches(spec: RobotSpec, contract: ObservationContract, policy: str = "the policy") -> list[str]:
    """Where the robot and the policy disagree on the block: one reports it in its state, the other does not."""
    if contract.has_block and spec.block_tracker is None:
        return [
            f"{BLOCK_TRACKER_MISSING}: {policy} reads a block's position (contract {contract.name!r}, block_slice "
            f"{list(contract.block_slice)}), robot {spec.robot_id!r} reports none (its spec has no block_tracker)"  # type: ignore[arg-type]
        ]
    if not contract.has_block and spec.block_tracker is not None:
        return [
            f"{BLOCK_NOT_READ}: robot {spec.robot_id!r} reports a block's position in its state (spec block_tracker), "
            f"{policy} reads none (contract {contract.name!r}): its state layout is another robot's"
        ]
    return []


def convention_mismatches(spec: RobotSpec, contract: ObservationContract, policy: str = "the policy") -> list[str]:
    """Where the robot and the policy count time or distance differently (control period, metres per unit) or
    disagree on the block (``block_mismatches``)."""
    problems = block_mismatches(spec, contract, policy)
    if abs(spec.control_period_s - contract.control_period_s) > MATCH_TOLERANCE:
        problems.append(
            f"robot {spec.robot_id!r} runs at {spec.control_period_s} s per control step, {policy} at "
            f"{contract.control_period_s} s"
        )
    if abs(spec.command_scale_m - contract.action_scale_m) > MATCH_TOLERANCE:
        problems.append(
            f"robot {spec.robot_id!r} moves {spec.command_scale_m} m per command unit, {policy} commands "
            f"{contract.action_scale_m} m per unit"
        )
    return problems


def mismatches(
    spec: RobotSpec, contract: ObservationContract, trained_delays: tuple[int, int], package_name: str
) -> list[str]:
    """What disagrees between the robot spec and a package (empty when they belong together).

    :param trained_delays: (low, high) actuation delays the policy was trained for (the manifest's
        ``action_delay_steps``), in control steps.
    """
    policy = f"package {package_name}"
    problems = convention_mismatches(spec, contract, policy)
    low, high = trained_delays
    robot_low, robot_high = spec.delay_range
    if not (low <= robot_low and robot_high <= high):
        measured = f"{spec.delay_steps} control steps ({spec.delay_ms:.0f} ms)"
        if robot_low != robot_high:
            measured += f", range {robot_low}..{robot_high}"
        problems.append(
            f"robot {spec.robot_id!r} has an action delay of {measured}, {policy} was trained for {low}..{high} steps"
        )
    return problems


def check_compatibility(
    spec: RobotSpec,
    contract: ObservationContract,
    trained_delays: tuple[int, int],
    package_name: str,
    override: bool = False,
) -> list[str]:
    """Raise ``CompatibilityError`` (one line: both values and the fixes) when the spec and the package disagree;
    with ``override`` return the disagreements instead (the caller logs them and records them in its report)."""
    problems = mismatches(spec, contract, trained_delays, package_name)
    if problems and not override:
        block = block_mismatches(spec, contract)
        fixes = BLOCK_FIXES if block and len(block) == len(problems) else FIXES
        raise CompatibilityError("; ".join(problems) + f". Fix: {fixes}")
    return problems
