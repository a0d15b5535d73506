"""RUN's way from an accepted state to a safe command: observation, the guarded policy, the safety filter.

numpy only (robot side). The observation is built from the state, the robot's delay line mapped to the commands the
loop sent (``CommandLine``) and the goal, exactly as the simulator built it (``contract.flat_observation``); the
policy is asked through ``PolicyGuard`` (a fault holds; too long a fault is the loop's to stop on); the filter plans
from the bounds of where the gripper is (``StateChecker``), the commands in flight and the previous command sent. The
previous command is this part's own: every command the loop sends is noted here (``note_sent``). In a cell, the arm's
separation barrier cuts the filtered command last and publishes the arm's reach after every command sent.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from deploy.contract import ObservationContract
from deploy.runtime.command_line import CommandLine
from deploy.runtime.policy_guard import OVERRUN, PolicyGuard
from deploy.runtime.safety import POLICY_FAULT, FilterResult, SafetyLimits, filter_action, hold_result
from deploy.runtime.separation import SeparationBarrier


class Proposal(NamedTuple):
    """One RUN tick's decision.

    :param flat: the observation the policy was given (float32 values).
    :param proposed: the policy's action (the hold when it gave none).
    :param result: the filter's answer (a hold with ``policy_fault`` when the policy failed).
    :param policy_id: the id of the policy asked.
    """

    flat: np.ndarray
    proposed: np.ndarray
    result: FilterResult
    policy_id: str


class CommandPath:
    """Observation -> policy -> filter, and the previous command sent.

    :param contract: the policy's contract.
    :param limits: what the filter enforces.
    :param line: the commands in flight (history and displacement).
    :param guard: runs the policy.
    :param separation: a cell arm's separation barrier (``deploy.runtime.separation``): it cuts every filtered
        command last and hears of every command sent; None for an arm alone.
    """

    def __init__(
        self,
        contract: ObservationContract,
        limits: SafetyLimits,
        line: CommandLine,
        guard: PolicyGuard,
        separation: SeparationBarrier | None = None,
    ) -> None:
        self.contract = contract
        self.separation = separation
        self.limits = limits
        self.line = line
        self.guard = guard
        self._hold = contract.hold()
        self.previous = contract.hold()  # the last command sent (command units)

    def note_sent(self, command: np.ndarray) -> None:
        self.previous = command
        if self.separation is not None:
            self.separation.sent(command)

    def may_home(self) -> bool:
        """Whether a HOME may go out now: always for an arm alone; in a cell, only while the partner's report is
        fresh (a HOME moves the arm; nothing moves while the partner is stale)."""
        return self.separation is None or self.separation.may_home()

    def observation(self, state: np.ndarray, goal: np.ndarray) -> np.ndarray:
        """The flat observation of ``state`` toward ``goal`` with the current history (float32 values)."""
        return self.contract.flat_observation(state, self.line.history, goal)

    def propose(
        self,
        flat: np.ndarray,
        bound: tuple[tuple[float, ...], tuple[float, ...]] | None,
        position: np.ndarray,
        age_s: float,
        wait_s: float,
    ) -> Proposal:
        """Ask the policy (waiting at most ``wait_s`` seconds) and filter its action: ``bound`` is where the gripper
        can be (metres), ``position`` its measured position, ``age_s`` the state's age (seconds)."""
        if self.separation is not None:
            # the partner the policy reads and the cut plans with: polled here, on the loop's thread, once (a report
            # that arrives during the policy's call waits for the next tick; the cut takes its age when it plans)
            self.separation.poll_partner()
        action, fault = self.guard.infer(flat, wait_s)
        asked = self.guard.asked_id  # the tick's record names the policy asked, whatever happens next
        proposed = action if action is not None else self._hold
        if fault and fault != OVERRUN:
            return Proposal(flat, proposed, hold_result(self.contract.action_dim, POLICY_FAULT), asked)
        result = self.filtered(proposed, bound, position, age_s, poll_partner=False)
        if fault:
            result = FilterResult(result.action, (POLICY_FAULT, *result.reasons), result.stop)
        return Proposal(flat, proposed, result, asked)

    def filtered(
        self,
        action: np.ndarray,
        bound: tuple[tuple[float, ...], tuple[float, ...]] | None,
        position: np.ndarray,
        age_s: float,
        poll_partner: bool = True,
    ) -> FilterResult:
        """The safety filter on ``action`` from the current bound and the commands in flight; in a cell, then the
        separation cut (``poll_partner``: read the partner's link first; False when this tick polled it already)."""
        result = filter_action(position, self.line.displacement_m(), action, self.previous, age_s, self.limits, bound)
        return result if self.separation is None else self.separation.cut(result, bound, poll_partner)

    def before_state(self) -> None:
        """What a tick does before its state arrives (the loop calls it as each tick's window opens): in a cell,
        read the partner's reports that came in since the last tick. The partner sends its report after its command,
        so it is waiting by the time this arm's next window opens; decoded now, while the loop waits for its state,
        it costs the state-to-command path nothing, and the polls on that path (``propose``) find the link empty."""
        if self.separation is not None:
            self.separation.poll_partner()
