"""Runs the policy once per tick and tells the loop when it has been failing for too long.

numpy only (robot side). A policy fails a tick when it raises, returns the wrong number of values, returns NaN/inf,
has not answered by the tick's deadline (``late``: run on a ``PolicyWorker`` thread, the tick waits for it no longer
and holds; the call is not repeated while it runs, and its answer, when it comes, is dropped), or, called inline,
takes longer than the control period (an overrun: its action is still used, it is late but valid). The loop holds
on all but the overrun and keeps a clock: ``failing_for(now)`` is how long the failures have lasted without a clean
answer in between, counted from the start of the call that first failed (a stalled call's time counts from when it
was made, not from when the stall was noticed); past ``LoopConfig.policy_fault_stop_s`` the loop stops safely.
Nothing raises here.
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Callable
from typing import Any

import numpy as np

from deploy.runtime.policy_worker import PolicyWorker

logger = logging.getLogger(__name__)

RAISED = "raised"
WRONG_SIZE = "wrong_size"
NON_FINITE = "non_finite"
OVERRUN = "overrun"
LATE = "late"
FAULT_KINDS = (RAISED, WRONG_SIZE, NON_FINITE, OVERRUN, LATE)


class PolicyGuard:
    """Calls the policy and tracks its failures.

    :param policy: float32 obs [1, D] -> float32 action [1, A]: a backend, or a ``PolicySlot`` (its entry is read
        once per call, so a hot swap lands between ticks, and the entry's ``policy_id`` is the call's).
    :param action_dim: values the policy must return.
    :param period_s: the control period (seconds): a call longer than it is an overrun.
    :param clock: monotonic clock in seconds.
    :param policy_id: the id of a bare backend's policy (its package's ``manifest_sha256``) for the tick log; a
        ``PolicySlot`` names its own.
    :param worker: where the calls run (None: inline, on the caller's thread; a test clock cannot time a thread).
    """

    def __init__(
        self,
        policy: Any,
        action_dim: int,
        period_s: float,
        clock: Callable[[], float] = time.monotonic,
        policy_id: str = "",
        worker: PolicyWorker | None = None,
    ):
        self.policy = policy
        self.worker = worker
        self._call_started = 0.0  # when the running (or last) call was made (seconds, ``clock``)
        self.policy_id = policy_id
        self.asked_id = ""  # the id of the policy the last infer() asked
        self.action_dim = action_dim
        self.period_s = period_s
        self._clock = clock
        self._failing_since: float | None = None
        self.last_fault = ""

    def infer(self, flat: np.ndarray, wait_s: float = float("inf")) -> tuple[np.ndarray | None, str]:
        """(action, fault): the action is None when it must not be used (raised, wrong size, NaN/inf, late);
        ``fault`` is one of ``FAULT_KINDS`` or "" for a clean, timely answer. ``wait_s``: how long (seconds) the
        tick can wait for a call on the worker (its deadline)."""
        worker = self.worker
        if worker is not None and worker.busy:
            if not worker.wait(0.0):
                return self._fault(LATE, None, "the policy's call from an earlier tick is still running")
            worker.take()  # the late call's answer: it answers an older observation
        if hasattr(self.policy, "entry"):  # a PolicySlot: one read gives the backend and its id together
            entry = self.policy.entry()
            backend, self.asked_id = entry.backend, entry.policy_id
        else:
            backend, self.asked_id = self.policy, self.policy_id
        self._call_started = start = self._clock()
        batch = flat[None, :]
        if worker is None:
            try:
                raw = backend(batch)
            except Exception as err:  # a broken model must hold the arm, not end the loop
                return self._fault(RAISED, None, f"the policy raised {err!r}")
        else:
            worker.submit(backend, batch)
            if not worker.wait(wait_s):
                return self._fault(LATE, None, f"the policy did not answer within the tick's {wait_s:.4f} s")
            raw, error = worker.take()
            if error is not None:
                return self._fault(RAISED, None, f"the policy raised {error!r}")
        try:
            action = np.asarray(raw, dtype=np.float64).reshape(-1)
        except Exception as err:  # not an array of numbers
            return self._fault(WRONG_SIZE, None, f"the policy returned no array of numbers ({err!r})")
        if action.size != self.action_dim:
            return self._fault(WRONG_SIZE, None, f"the policy returned {action.size} values, not {self.action_dim}")
        if not all(map(math.isfinite, action.tolist())):  # Python floats: numpy's calls cost more on a cold tick
            return self._fault(NON_FINITE, None, "the policy returned NaN or inf")
        if self._clock() - start > self.period_s:
            return self._fault(OVERRUN, action, f"the policy took longer than the {self.period_s} s period")
        self._failing_since = None
        self.last_fault = ""
        return action, ""

    def failing_for(self, now: float) -> float:
        """Seconds the policy has failed without a clean answer in between (0 when it works)."""
        return 0.0 if self._failing_since is None else now - self._failing_since

    def stalled_for(self, now: float) -> float:
        """Seconds a failing policy's call has been running and still is (0 when no call is late): a tick with no
        fresh state asks nothing, but a stall it already saw keeps counting (campaign seed 3001907: reply latency
        held the states back and the stop came 104 ms after the stall began, not within 75 ms)."""
        worker = self.worker
        if worker is None or not worker.busy or worker.wait(0.0):
            return 0.0
        return self.failing_for(now)

    def close(self) -> None:
        """Stop the worker thread, if any."""
        if self.worker is not None:
            self.worker.close()

    def _fault(self, kind: str, action: np.ndarray | None, text: str) -> tuple[np.ndarray | None, str]:
        if self._failing_since is None:
            self._failing_since = self._call_started  # a stall counts from the call's start
            logger.warning("policy fault: %s", text)
        self.last_fault = kind
        return action, kind
