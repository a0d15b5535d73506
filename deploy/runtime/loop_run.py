"""RUN: what the controller does with an accepted state (or a period without one) while an episode runs.

numpy only (robot side). An accepted state -> the observation (the delay line synced to the commands sent) -> the
guarded policy -> the safety filter, planned from the checker's bounds (``CommandPath``) -> the command; a policy
failing for ``policy_fault_stop_s`` -> SAFE_STOP; an observation that is not finite as float32 -> SAFE_STOP. A period
without a fresh state: a heartbeat while the state is younger than ``watchdog_hold_s``, then the filter's hold (and
its stop past ``watchdog_stop_s``). Acts through the controller's actions (``deploy.runtime.loop.Controller``).
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import numpy as np

from deploy.runtime.safety import POLICY_FAULT, FilterResult
from deploy.runtime.tick_record import EMPTY, TickRecord
from deploy.wire import HOLD_SEQ, StateMsg

if TYPE_CHECKING:
    from deploy.runtime.loop import Controller

NON_FINITE_OBSERVATION = "non_finite_observation"  # reason of a tick whose float32 observation held NaN/inf
POLICY_WAIT_FLOOR_PERIODS = 1.0  # the least a tick waits for the policy (control periods)


class RunTicks:
    """The RUN ticks of one controller (module docstring); no state of its own: the episode's steps are the
    ``EpisodeTracker``'s, the policy's faults the ``PolicyGuard``'s.

    :param controller: the controller whose parts are asked and whose actions are used.
    """

    def __init__(self, controller: Controller) -> None:
        self.ctl = controller

    def on_state(self, t_in: float, msg: StateMsg) -> TickRecord | None:
        """An accepted state received at ``t_in`` (seconds) in an episode with steps left: ask, filter, send."""
        ctl = self.ctl
        episodes = ctl.episodes
        if episodes.steps and msg.pending and msg.pending[-1] == HOLD_SEQ:
            ctl.counts["robot_held"] += 1  # our previous command was lost or reached the robot after its step
        if len(msg.pending) > ctl.spec.delay_range[1]:
            ctl.counts["line_longer_than_spec"] += 1  # the robot's delay grew past its spec: recalibrate
        ctl.line.sync(msg.pending)
        flat = ctl.path.observation(msg.state, episodes.current.goal)  # type: ignore[union-attr]
        if not all(map(math.isfinite, flat.tolist())):  # what the policy would get, after the float32 cast
            # the state passed its checks, so a goal beyond float32's range: no later tick can do better
            ctl.counts["non_finite_observations"] += 1
            ctl.interventions.add((NON_FINITE_OBSERVATION,))
            ctl.safe_stop("the observation is not finite as float32 (a goal beyond float32's range?)")
            return ctl.record(msg, flat, ctl.hold, ctl.hold, (NON_FINITE_OBSERVATION,), float("nan"), True)
        position = msg.state[ctl.position_slice]
        age = ctl.clock() - ctl.intake.last_valid_t
        # until the tick's deadline, and at least a period: a state read at the deadline still gets its answer, and a
        # busy machine's late thread wake-up is no policy fault
        wait_s = max(ctl.pacer.deadline - ctl.clock(), POLICY_WAIT_FLOOR_PERIODS * ctl.period_s)
        proposal = ctl.path.propose(flat, ctl.intake.bounds, position, age, wait_s)  # type: ignore[arg-type]
        guard = ctl.path.guard
        failing = guard.failing_for(ctl.clock())
        if failing >= ctl.config.policy_fault_stop_s:
            ctl.interventions.add(proposal.result.reasons)
            ctl.safe_stop(f"the policy failed ({guard.last_fault}) for {failing:.3f} s")
            return ctl.record(
                msg, flat, proposal.proposed, ctl.hold, proposal.result.reasons, float("nan"), True, proposal.policy_id
            )
        return self.apply(proposal.result, t_in, msg, flat, proposal.proposed, True, proposal.policy_id)

    def stalled_policy(self, now: float) -> str:
        """Why to stop, when a policy call the loop saw fail is still running past ``policy_fault_stop_s`` at
        ``now`` (seconds): a tick that asks nothing (no fresh state, or a rejected one) still ends a stall in time
        (campaign seeds 3001907, 4000965: the stop came 104 and 80 ms after the stall began, due within 75). ""
        otherwise."""
        guard = self.ctl.path.guard
        stalled = guard.stalled_for(now)
        if stalled < self.ctl.config.policy_fault_stop_s:
            return ""
        return f"the policy failed ({guard.last_fault}) for {stalled:.3f} s"

    def on_silence(self, now: float) -> TickRecord | None:
        """No fresh state this period (``now``: seconds): a heartbeat while the last valid state is young enough,
        else the filter's hold from the anchor, aged."""
        ctl = self.ctl
        if stalled := self.stalled_policy(now):  # a stall seen before the states stopped coming
            ctl.interventions.add((POLICY_FAULT,))
            ctl.safe_stop(stalled)
            return ctl.record(None, EMPTY, ctl.hold, ctl.hold, (POLICY_FAULT,), float("nan"), True)
        age = now - ctl.intake.last_valid_t
        if age <= ctl.limits.watchdog_hold_s:
            ctl.outbox.heartbeat()  # a late frame is no fault yet; a lock-step robot whose answer was lost replies
            return None
        position = ctl.intake.anchor.state[ctl.position_slice]  # type: ignore[union-attr]
        result = ctl.path.filtered(ctl.hold, ctl.intake.bounds, position, age)
        return self.apply(result, None, None, EMPTY, ctl.hold, False)

    def apply(
        self,
        result: FilterResult,
        t_in: float | None,
        msg: StateMsg | None,
        flat: np.ndarray,
        proposed: np.ndarray,
        counts_as_step: bool,
        policy_id: str = "",
    ) -> TickRecord | None:
        """Send the filter's command (or stop); ``policy_id``: the policy asked this tick ("" when none was)."""
        ctl = self.ctl
        ctl.interventions.add(result.reasons)
        if result.stop:
            ctl.safe_stop("watchdog: no fresh valid state within watchdog_stop_s")
            return ctl.record(msg, flat, proposed, ctl.hold, result.reasons, float("nan"), True, policy_id)
        t_out = ctl.outbox.command(result.action)
        latency = float("nan")
        if t_in is not None:
            latency = t_out - t_in
            ctl.stats.on_command(ctl.tick, t_in, t_out, restart=counts_as_step and ctl.episodes.steps == 0)
        if counts_as_step:
            ctl.episodes.step_taken()
        return ctl.record(msg, flat, proposed, result.action, result.reasons, latency, False, policy_id)
