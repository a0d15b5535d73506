"""The texts that tell an operator why the loop gave up: no valid state at startup, a robot that never homed.

numpy-free, robot side. Pure functions of the loop's counters and parts, so the stop reasons stay one line each in
the code that decides them.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping

from deploy.contract import ObservationContract
from deploy.robot_spec import RobotSpec
from deploy.runtime.state_check import StateChecker
from deploy.runtime.state_frames import STATE_LENGTH

INVALID_STATE_PREFIXES = ("malformed_", "implausible_")  # counters of states received and rejected
NAN_STATES = "nan_states"


def startup_failure(counts: Counter[str], decoder_errors: Mapping[str, int], contract: ObservationContract) -> str:
    """What came from the robot before the startup timeout and why none of it was a valid state."""
    rejected = {k: v for k, v in sorted(counts.items()) if k.startswith(INVALID_STATE_PREFIXES) and v}
    if counts[NAN_STATES]:
        rejected[NAN_STATES] = counts[NAN_STATES]
    undecoded = {k: v for k, v in sorted(decoder_errors.items()) if v}
    if not rejected and not undecoded:
        return "nothing came back: is the robot running and the port right?"
    parts = []
    if rejected:
        listed = ", ".join(f"{k} {v}" for k, v in rejected.items())
        parts.append(f"{sum(rejected.values())} states were received and rejected ({listed})")
    if undecoded:
        listed = ", ".join(f"{k} {v}" for k, v in undecoded.items())
        parts.append(f"frames failed to decode ({listed}): a wrong baud rate or another protocol?")
    if counts[f"malformed_{STATE_LENGTH}"]:
        fields = ", ".join(f"{name}[{size}]" for name, size in contract.state_fields)
        parts.append(
            f"the robot's states do not have the {contract.state_dim} values the contract expects ({fields}): wrong "
            "package for this robot; use a package trained for it"
        )
    return "; ".join(parts)


def homing_failure(latched: int, off_home: int, spec: RobotSpec, checker: StateChecker, repeats: int) -> str:
    """The hint after ``max_home_retries`` unanswered HOMEs: HOMED states that came with the e-stop ``latched``,
    ``off_home`` ones away from the spec's home, and ``repeats`` of one sequence number (a stuck sender)."""
    hint = ""
    if latched:
        hint = f" and that a HOME releases its e-stop ({latched} HOMED states came with it active)"
    if off_home:
        hint += (
            f"; {off_home} HOMED states lay away from the spec's home {list(spec.home_position_m or ())} (the last "
            f"{checker.home_error_m:.4f} m, tolerance {checker.home_tolerance_m:.4f} m with the noise): if the robot's "
            "home moved, re-run `robot-grpo calibrate`"
        )
    if repeats:
        hint += (
            f"; its last {repeats} states all repeated one sequence number (a stuck sender: a repeated state is never "
            "read, HOMED or not)"
        )
    return hint
