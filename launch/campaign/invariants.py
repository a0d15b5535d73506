"""What every campaign run must satisfy, checked after the run from what the simulator and the wire saw.

- ``outside_box``: the true gripper (the simulator's, not the reported one) never more than the tolerance (1 mm)
  outside the workspace box, at any control step of the physics;
- ``traceback``: the run raised an error that is not one of the runtime's named ones; ``did_not_end``: the run did
  not reach DONE by itself (the tick limit ended it); ``unnamed_abort``: an episode was aborted, or the state
  machine moved, without a named reason; (``hang``, a run past its wall-clock timeout, is judged by the pool);
- ``command_out_of_limits``: a command the robot received is not finite or exceeds the action limit;
  ``ticklog_incomplete``: the tick log does not hold every tick the loop recorded;
- ``stop_within_spec``: a run whose faults are all ones the spec allows (noise, latency, gain inside the calibrated
  range) had a safe stop or an aborted episode. Judged only when the loop kept its period (no overrun): a loop the
  host starved of whole periods was not given what the spec describes (on a loaded 2-core machine, a 10 ms lock-step
  loop that misses periods steps the robot slower than its rate, and the loop rightly ends the run for it);
- ``false_estop_claim``: the run ended saying the robot did not acknowledge its e-stop, though no fault kept it from
  acknowledging (it ignored e-stops, or its sender froze on an old frame) and its stamps could time its states (not
  a clock jump under late replies: ``STAMP_BLIND``, a known limit of the wire, which carries no echo of the newest
  message the robot heard);
- ``unconfirmed_motion_not_stopped``: while the position sensor was frozen or the motors stalled, the loop sent
  commands whose net motion over ``MOTION_WINDOW_S`` (robot seconds, since the last HOME) reaches
  ``UNCONFIRMED_MOTION_M`` at the spec's nominal gain, and no e-stop reached the robot within ``DETECT_S`` (robot
  seconds) of that, while the fault lasted and the loop went on commanding motion: motion that *stays* unconfirmed
  must end in a safe stop (issue 31: a stalled motor detected within 1 s). A sensor that comes back within that time
  lets the motion be confirmed; a loop that commands no motion past that time until its next HOME within the fault
  (the arm goes to a known place) has stopped it too, once per fault: the motion after that HOME must end in an
  e-stop. The robot's own e-stop (``robot_estop``) in force in that time is such a stop: it drops the commands in
  flight and holds the arm just as the loop's does, and the loop sends no e-stop over it;
- ``late_policy_stop``: a policy call stalled past ``policy_fault_stop_s`` and the loop neither decided a safe
  stop, nor left RUN (where it asks the policy), nor did the robot hear an e-stop within ``policy_fault_stop_s``
  plus the slack of the call's start (the tick must not wait on a late policy; a link that cuts or holds back
  frames may delay the e-stop's arrival).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from deploy.robot_spec import RobotSpec
from deploy.runtime.loop_safe_stop import (
    ESTOP_NOT_ACKNOWLEDGED,  # the count the loop keeps when it ends for that reason
)
from deploy.runtime.run_report import RunReport
from deploy.runtime.state_machine import LoopState
from deploy.wire import CommandMsg, EStopMsg, HomeMsg, Message

INVARIANTS = (
    "outside_box",
    "traceback",
    "hang",
    "did_not_end",
    "unnamed_abort",
    "command_out_of_limits",
    "ticklog_incomplete",
    "stop_within_spec",
    "false_estop_claim",
    "unconfirmed_motion_not_stopped",
    "late_policy_stop",
)
TICK_LIMIT_REASON = "tick limit reached"  # Controller.run's DONE reason when max_ticks ended it
NO_ACK_KINDS = ("estop_ignored", "frozen_sender")  # faults after which the robot really never acknowledges a stop
# A robot clock that jumps while its replies are late: the latency is learnt into the new clock offset, and the
# states it made before it heard the stop read as made after it (seed 9653). No stamp can tell them apart
STAMP_BLIND = ("clock_jump", "reply_latency")  # (the jump, the latency it began under)
ABORT_SOURCES = (LoopState.HOMING, LoopState.RUN)
ABORT_TARGETS = (LoopState.SAFE_STOP, LoopState.HOLD, LoopState.DONE)
ACTION_TOLERANCE = 1e-6  # command units (float64 on the wire)
NO_MOTION_KINDS = ("sensor_freeze", "motor_stall")  # faults under which no commanded motion can be confirmed
ROBOT_STOP_KINDS = ("robot_estop",)  # faults that stop the arm on the robot's side (its own e-stop)
UNCONFIRMED_MOTION_M = 0.05  # net commanded motion (metres, nominal gain) that must not go unconfirmed...
MOTION_WINDOW_S = 1.0  # ... within this many robot seconds ...
DETECT_S = 1.0  # ... without an e-stop within this many robot seconds after it reached that
STALL_SLACK_PERIODS = 2.0  # a stop may come this many loop periods after policy_fault_stop_s...
STALL_SLACK_MIN_S = 0.05  # ... or this many seconds, whichever is longer (a loaded machine's scheduling)


@dataclass
class RunEvidence:
    """What a run left behind, for the checks. Units: metres, seconds (``time.monotonic``).

    :param report: the controller's report (``Controller.report()``, also after an error).
    :param error: the error the run raised ("" if none); ``named_error``: whether it is a named (expected) one.
    :param trace: the true gripper positions, one per physics step (n, 3).
    :param received: (time, message, heard) of every message that reached the robot's port.
    :param hook_ticks: the ticks the loop recorded (``on_tick`` with a record), in order.
    :param logged_ticks: the ticks read back from the tick log, in order.
    :param stalls: (start, seconds) of each policy stall.
    :param stop_times: when the loop decided each safe stop (``time.monotonic``: the tick that set ``stop``).
    :param idle_times: when the loop ticked outside RUN (``time.monotonic``): it asks no policy there, the robot holds.
    :param fault_kinds: the kinds of the run's faults.
    :param within_spec: every fault is one the spec allows.
    :param fault_windows: (kind, start, duration) of each robot fault, in robot ticks (``received``'s indices: the
        robot counts one tick per message it decodes).
    :param ticks_per_robot_s: robot ticks per second of robot time (control periods per second).
    """

    report: RunReport
    error: str
    named_error: bool
    trace: np.ndarray
    received: Sequence[tuple[float, Message, bool]]
    hook_ticks: list[int]
    logged_ticks: list[int]
    stalls: list[tuple[float, float]] = field(default_factory=list)
    stop_times: list[float] = field(default_factory=list)
    idle_times: list[float] = field(default_factory=list)
    fault_kinds: list[str] = field(default_factory=list)
    within_spec: bool = False
    fault_windows: list[tuple[str, int, int]] = field(default_factory=list)
    ticks_per_robot_s: float = 25.0


def steps_outside(trace: np.ndarray, spec: RobotSpec, tolerance_m: float) -> tuple[int, float]:
    """(physics steps further than ``tolerance_m`` outside the box, the largest distance outside in metres)."""
    if trace.size == 0:
        return 0, 0.0
    low, high = np.asarray(spec.workspace_low), np.asarray(spec.workspace_high)
    beyond = np.maximum(low - trace, trace - high).max(axis=1)
    return int((beyond > tolerance_m).sum()), float(max(0.0, beyond.max()))


def check_run(
    ev: RunEvidence, spec: RobotSpec, period_s: float, policy_fault_stop_s: float, tol_m: float
) -> list[tuple[str, str]]:
    """The invariants ``ev`` breaks: (invariant, one-line detail) pairs; empty when the run is fine."""
    out: list[tuple[str, str]] = []
    report = ev.report
    outside, worst = steps_outside(ev.trace, spec, tol_m)
    if outside:
        out.append(("outside_box", f"{outside} physics steps outside the box, up to {worst * 1000:.1f} mm"))
    if ev.error and not ev.named_error:
        out.append(("traceback", ev.error.strip().splitlines()[-1] if ev.error.strip() else "error"))
    out += _check_end(report, ev)
    out += _check_commands(ev.received, spec)
    if ev.hook_ticks != ev.logged_ticks:
        missing = sorted(set(ev.hook_ticks) - set(ev.logged_ticks))
        out.append(
            (
                "ticklog_incomplete",
                f"{len(ev.hook_ticks)} ticks recorded, {len(ev.logged_ticks)} logged; missing {missing[:5]}",
            )
        )
    stops = report.counts.get("safe_stops", 0)
    aborted = sum(e.aborted for e in report.episodes)
    if ev.within_spec and (stops or aborted) and not report.timing.get("overruns", 0):
        ended = [t for t in report.transitions if t.source in ABORT_SOURCES and t.target in ABORT_TARGETS]
        reasons = "; ".join(sorted({t.reason[:80] for t in ended}))
        out.append(("stop_within_spec", f"{stops} safe stops, {aborted} aborted episodes: {reasons}"))
    if (
        report.counts.get(ESTOP_NOT_ACKNOWLEDGED)
        and not set(NO_ACK_KINDS) & set(ev.fault_kinds)
        and not _stamps_blind(ev.fault_windows)
    ):
        out.append(
            ("false_estop_claim", f"ended with {ESTOP_NOT_ACKNOWLEDGED}; no fault kept the robot from acknowledging")
        )
    out += _check_unconfirmed_motion(ev, spec)
    out += _check_stalls(ev, period_s, policy_fault_stop_s)
    return out


def _stamps_blind(fault_windows: list[tuple[str, int, int]]) -> bool:
    """Whether the robot's clock jumped while its replies were late (``STAMP_BLIND``): the loop's reading of its
    stamps then takes states made before the stop for states made after it, and the safe reading (the stop was not
    acknowledged: use the hardware e-stop) is all it can give. A jump before the latency is learnt on fast replies."""
    jump, late = STAMP_BLIND
    return any(
        start <= j_start < start + duration
        for kind, start, duration in fault_windows
        if kind == late
        for j_kind, j_start, _ in fault_windows
        if j_kind == jump
    )


def _check_unconfirmed_motion(ev: RunEvidence, spec: RobotSpec) -> list[tuple[str, str]]:
    window = max(1, round(MOTION_WINDOW_S * ev.ticks_per_robot_s))
    detect = round(DETECT_S * ev.ticks_per_robot_s)
    m_per_unit = spec.command_scale_m * np.asarray(spec.actuator_gain)
    moves = np.zeros((len(ev.received), 3))
    for i, (_, msg, heard) in enumerate(ev.received):
        if heard and isinstance(msg, CommandMsg):
            moves[i] = np.asarray(msg.action[:3], dtype=np.float64) * m_per_unit
    travelled = np.vstack([np.zeros(3), np.cumsum(moves, axis=0)])  # travelled[i]: before tick i
    estops = [i for i, (_, msg, _) in enumerate(ev.received) if isinstance(msg, EStopMsg)]
    homes = [i for i, (_, msg, _) in enumerate(ev.received) if isinstance(msg, HomeMsg)]  # the arm starts over
    for kind, start, duration in ev.fault_windows:
        if kind not in NO_MOTION_KINDS:
            continue
        end = min(start + duration, len(ev.received))
        rehomed = False  # the loop already held a stretch of this fault and homed: no second time
        k = start + 1
        while k <= end:  # the net motion of ticks j..k-1, within the window
            j = max(start, k - window, *(h + 1 for h in homes if h < k))
            if np.linalg.norm(travelled[k] - travelled[j]) < UNCONFIRMED_MOTION_M:
                k += 1
                continue
            robot_stopped = any(
                s <= k + detect and s + d >= start for name, s, d in ev.fault_windows if name in ROBOT_STOP_KINDS
            )
            if robot_stopped or _motion_stopped((start, k, start + duration), detect, estops):
                break
            home = None if rehomed else _held_then_homed(moves, (k, end), detect, homes)
            if home is None:
                return [
                    (
                        "unconfirmed_motion_not_stopped",
                        f"{kind} from robot tick {start}: {UNCONFIRMED_MOTION_M * 100:.0f} cm commanded by tick {k}, "
                        f"no e-stop by tick {k + detect}",
                    )
                ]
            rehomed, k = True, home + 1
    return []


def _motion_stopped(ticks: tuple[int, int, int], detect: int, estops: list[int]) -> bool:
    """Whether the unconfirmed motion of a fault from robot tick ``start`` to ``end`` (``ticks``: start, k, end)
    that reached ``UNCONFIRMED_MOTION_M`` at tick ``k`` ended within ``detect`` ticks: an e-stop reached the robot,
    or the fault ended first (the sensor or motors came back, so the motion could be confirmed again; where the arm
    went meanwhile is ``outside_box``'s to judge)."""
    start, k, end = ticks
    return any(start <= i <= k + detect for i in estops) or end <= k + detect


def _held_then_homed(moves: np.ndarray, ticks: tuple[int, int], detect: int, homes: list[int]) -> int | None:
    """Where the loop stopped an unconfirmed motion (reached at tick ``k``; ``ticks``: k, the fault's end) without
    an e-stop: it commanded no motion after ``k + detect`` until its next HOME within the fault (the arm goes where
    its place is known: a stretch of rejected or missing states gave the loop nothing to judge, seeds 3215,
    5001533). Returns that HOME's tick, from which the motion is judged afresh: the next episode's motion under the
    same fault must end in an e-stop (seeds 6000407, 7450 were stopped within 8-15 ticks of it) and gets no second
    HOME. None: the loop went on commanding motion past the second, or held without homing (an arm left where the
    motion took it, with nothing said)."""
    k, end = ticks
    home = next((h for h in homes if h >= k - 1), None)
    if home is None or home >= end or np.any(moves[k + detect + 1 : home]):
        return None
    return home


def _check_end(report: RunReport, ev: RunEvidence) -> list[tuple[str, str]]:
    out = []
    last = report.transitions[-1] if report.transitions else None
    if ev.error and ev.named_error:
        pass  # a named error ends the run (e.g. no valid state before the startup timeout); the loop is in DONE
    elif last is None or last.target is not LoopState.DONE:
        out.append(("did_not_end", "the run stopped before the loop reached DONE"))
    elif last.reason == TICK_LIMIT_REASON:
        out.append(
            ("did_not_end", f"the tick limit ended the run at tick {last.tick} ({len(report.episodes)} episodes done)")
        )
    unnamed = [t for t in report.transitions if not t.reason.strip()]
    aborts = [
        t for t in report.transitions if t.source in ABORT_SOURCES and t.target in ABORT_TARGETS and t.reason.strip()
    ]
    aborted = sum(e.aborted for e in report.episodes)
    if unnamed:
        out.append(
            ("unnamed_abort", f"transition {unnamed[0].source.value} -> {unnamed[0].target.value} has no reason")
        )
    if aborted > len(aborts) + bool(ev.error):
        out.append(("unnamed_abort", f"{aborted} episodes aborted, {len(aborts)} named aborts"))
    return out


def _check_commands(received: Sequence[tuple[float, Message, bool]], spec: RobotSpec) -> list[tuple[str, str]]:
    for _, msg, _heard in received:
        if isinstance(msg, CommandMsg):
            action = np.asarray(msg.action, dtype=np.float64)
            if not np.all(np.isfinite(action)) or np.any(np.abs(action) > spec.max_action + ACTION_TOLERANCE):
                return [("command_out_of_limits", f"command seq {msg.seq} = {action.tolist()}")]
    return []


def _check_stalls(ev: RunEvidence, period_s: float, stop_s: float) -> list[tuple[str, str]]:
    slack_s = max(STALL_SLACK_PERIODS * period_s, STALL_SLACK_MIN_S)
    # the robot's receipt of an e-stop, the loop's decision to stop, or a tick outside RUN (a robot restart put the
    # loop in HOLD, seed 3000477: no policy is asked, the robot holds): a link that cuts or holds back frames delays
    # the e-stop's arrival (seeds 3000577, 3001907), but the tick did not wait on the policy
    received = [t for t, msg, _ in ev.received if isinstance(msg, EStopMsg)]
    estops = sorted(received + ev.stop_times + ev.idle_times)
    out = []
    for start, seconds in ev.stalls:
        if seconds <= stop_s + slack_s:
            continue
        due = start + stop_s + slack_s
        first = next((t for t in estops if t >= start), None)
        if first is None or first > due:
            late = "never" if first is None else f"{(first - start) * 1000:.0f} ms after the call began"
            out.append(
                (
                    "late_policy_stop",
                    f"a {seconds * 1000:.0f} ms policy stall: e-stop {late}; due within "
                    f"{(stop_s + slack_s) * 1000:.0f} ms",
                )
            )
    return out
