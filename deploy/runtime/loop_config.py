"""Settings of the control loop (``deploy.runtime.loop.Controller``). Units: seconds, control steps, metres."""

from __future__ import annotations

from dataclasses import dataclass

from deploy.runtime.cpu_latency import check_cpu_latency_us
from deploy.runtime.realtime import MAX_RT_PRIORITY
from deploy.runtime.rejection_window import RejectionWindow

HOME_RETRY_ROUND_TRIPS = 2.0  # a HOME is resent only after this many measured round trips without its answer


@dataclass(frozen=True)
class LoopConfig:
    """How the loop runs. Units: seconds, control steps, metres.

    :param period_s: control period (None: the contract's ``control_period_s``).
    :param max_episode_steps: policy commands per episode (control steps).
    :param success_radius_m: an episode succeeds when its final achieved goal (the gripper's position, or the block's
        in a push task) is closer than this to the goal (metres).
    :param hold_ticks: fresh states in a row, answered with the hold, before the first episode and after recovery.
    :param startup_timeout_s: raise if no valid state arrives this long after connecting.
    :param recover: after a safe stop, resume when the robot answers again (False: end the run).
    :param recover_timeout_s: end the run if no valid state comes this long in safe stop (silence, or only malformed,
        implausible or non-finite states), counted from the stop or the last valid state after it.
    :param home_retry_ticks: resend HomeMsg when its HOMED state has not come after this many ticks, or after
        ``HOME_RETRY_ROUND_TRIPS`` measured round trips if that is longer.
    :param max_home_retries: safe stop when this many resent HOMEs of one episode went unanswered in a row: the
        robot answers but never reports HOMED (its homing is broken or blocked), and resending forever would keep
        the line waiting with nobody told. The stop aborts the episode; after recovery the next one homes anew.
    :param max_implausible_states: safe stop after this many implausible states in a row (each one is held).
    :param rejection_window_states: the last this many states (control steps that brought one in HOLD, HOMING or
        RUN) are remembered for ``max_rejected_in_window``.
    :param max_rejected_in_window: safe stop when this many of the last ``rejection_window_states`` states were
        rejected (implausible, non-finite or malformed), in a row or not: a robot wrong on every other state never
        reaches ``max_implausible_states`` in a row. The default (10 of 50, 20%) is far above what an honest robot
        on a lossy link is rejected for (a lost command leaves a gap, which is no rejection).
    :param resync_states: consistent states in a row that confirm a robot restart (then hold and re-home).
    :param max_robot_resets: the run ends (after a safe stop) when the robot reset itself more often than this within
        ``robot_reset_window_s``: restarts (a reboot: clock and sequence began again) and homings no HOME asked for
        (a protective stop). Each one alone costs a hold and a re-home; a robot that keeps rebooting (a brown-out)
        or protective-stopping (it keeps hitting something) must be looked at, not re-homed for ever.
    :param robot_reset_window_s: seconds over which ``max_robot_resets`` is counted.
    :param policy_fault_stop_s: safe stop when the policy has failed (NaN/inf, raised, wrong size, overran) for this
        long without a clean answer in between (seconds).
    :param stop_ack_timeout_s: at shutdown, repeat the e-stop every period for at most this long until the robot
        acknowledges it (a state flagged ESTOP_ACTIVE). In safe stop it repeats every period until acknowledged; a
        robot that keeps sending states without acknowledging it for this long ends the run (it hears the loop but
        does not stop: ``estop_not_acknowledged`` in the counts).
    :param max_ticks: end the run after this many ticks (None: when the goals run out).
    :param reconnect_interval_s: after a port failure, reopen the port at most this often.
    :param realtime_priority: run the loop's thread under SCHED_FIFO at this priority (1..99; Linux, needs root or
        CAP_SYS_NICE); None keeps the default scheduler. The previous policy is restored when the run ends. The
        policy's thread runs at the same priority.
    :param cpu: pin the loop's thread and its policy's thread to this CPU (Linux; None: free to move). With a
        ``realtime_priority``, the policy call's hand-off then wakes no other CPU (``deploy.runtime.realtime``).
    :param cpu_latency_us: while the loop runs, hold a PM QoS request that no CPU idles in a state slower than this
        to leave (microseconds; 0: idle CPUs poll; Linux ``/dev/cpu_dma_latency``, needs root or write access to
        it); None asks nothing. Every tick begins with a wake from idle; on the 2-core benchmark VM holding 0 took a
        single arm's tick p99 from 1.11 to 0.70 ms and a cell arm's from 1.06-1.13 to 0.77-0.89 ms (SCHED_FIFO;
        ``deploy.runtime.cpu_latency``, ``benchmarks/results/control_loop_cpu_latency.md``).
    :param retract_max_steps: after each episode, drive the gripper back toward the spec's home through the filter
        (and a cell arm's separation barrier) for at most this many control steps before the HOME
        (``deploy.runtime.retract``); 0: the HOME goes at once (an arm alone: nothing else is in its way).
    :param retract_tolerance_m: the retract is over once the gripper is this close to home (metres).
    :param freeze_gc: move everything allocated before the loop into the GC's permanent generation and turn the
        automatic collector off for the run: the loop collects in each tick's slack, after its command went out
        (``deploy.runtime.slack_collector``), never between a state and its answer.
    """

    period_s: float | None = None
    max_episode_steps: int = 50
    success_radius_m: float = 0.05
    hold_ticks: int = 3
    startup_timeout_s: float = 5.0
    recover: bool = True
    recover_timeout_s: float = 60.0
    home_retry_ticks: int = 5
    max_home_retries: int = 10
    max_implausible_states: int = 5
    rejection_window_states: int = 50
    max_rejected_in_window: int = 10
    resync_states: int = 3
    max_robot_resets: int = 3
    robot_reset_window_s: float = 60.0
    policy_fault_stop_s: float = 0.1
    stop_ack_timeout_s: float = 0.5
    max_ticks: int | None = None
    reconnect_interval_s: float = 0.5
    realtime_priority: int | None = None
    cpu: int | None = None
    cpu_latency_us: int | None = None
    freeze_gc: bool = True
    retract_max_steps: int = 0
    retract_tolerance_m: float = 0.02

    def __post_init__(self) -> None:
        if self.realtime_priority is not None and not 1 <= self.realtime_priority <= MAX_RT_PRIORITY:
            raise ValueError(f"realtime_priority must be in 1..{MAX_RT_PRIORITY} or None, got {self.realtime_priority}")
        if self.cpu_latency_us is not None:
            check_cpu_latency_us(self.cpu_latency_us)
        if self.cpu is not None and self.cpu < 0:
            raise ValueError(f"cpu must be a CPU number >= 0 or None, got {self.cpu}")
        for name in ("max_episode_steps", "hold_ticks", "home_retry_ticks", "max_implausible_states"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be >= 1, got {getattr(self, name)}")
        RejectionWindow(self.rejection_window_states, self.max_rejected_in_window)  # raises on a bad pair
        if self.resync_states < 2:
            raise ValueError(f"resync_states must be >= 2 (one state confirms nothing), got {self.resync_states}")
        for name in (
            "startup_timeout_s",
            "recover_timeout_s",
            "success_radius_m",
            "reconnect_interval_s",
            "policy_fault_stop_s",
            "stop_ack_timeout_s",
            "robot_reset_window_s",
            "retract_tolerance_m",
        ):
            if not getattr(self, name) > 0:
                raise ValueError(f"{name} must be > 0, got {getattr(self, name)}")
        if self.retract_max_steps < 0:
            raise ValueError(
                f"retract_max_steps must be >= 0 control steps (0: no retract), got {self.retract_max_steps}"
            )
        if self.max_robot_resets < 0:
            raise ValueError(
                f"max_robot_resets must be >= 0 (0: the first restart or unrequested home ends the run), got "
                f"{self.max_robot_resets}"
            )
        if self.max_home_retries < 0:
            raise ValueError(
                f"max_home_retries must be >= 0 (0: stop at the first unanswered HOME), got {self.max_home_retries}"
            )
        if self.period_s is not None and not self.period_s > 0:
            raise ValueError(f"period_s must be > 0 seconds, got {self.period_s}")
