"""Runs policy calls on one worker thread, so a late call never holds the control tick past its deadline.

numpy-free, robot side. Python cannot interrupt a stuck native call (an inference engine waiting on a device, a
page fault, a lock), so the call runs here and the tick waits for it only until its deadline. A call still running
at the next tick is not called again: the tick holds, and once the call returns its answer is dropped (it answers an
older observation) and the next tick asks anew. The worker is a daemon thread: a call that never returns does not
keep the process alive after the run.

The hand-off is two bare locks used as binary semaphores (job posted, result posted), not a ``Condition``: a
``Condition.wait`` allocates a lock and re-takes the condition's own lock on each wake, and that cost sits on every
tick's latency twice (to the worker and back). Measured on the 25 Hz benchmark tick: p50 0.63 -> 0.58 ms.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any


class PolicyWorker:
    """One call at a time on a worker thread; the caller waits at most as long as it says.

    Only the controller's thread calls ``submit``/``wait``/``take``/``close``; the worker thread only runs the job
    and posts its result. ``_job_posted`` is released once per job (or at close), ``_result_posted`` once per
    result, and each is acquired by exactly one side, so neither is ever released twice.
    """

    def __init__(self) -> None:
        self._job_posted = threading.Lock()
        self._job_posted.acquire()
        self._result_posted = threading.Lock()
        self._result_posted.acquire()
        self._job: tuple[Callable[[Any], Any], Any] | None = None
        self._result: tuple[Any, BaseException | None] | None = None
        self._busy = False
        self._closed = False
        self._thread = threading.Thread(target=self._serve, name="policy-worker", daemon=True)
        self._thread.start()

    @property
    def native_id(self) -> int:
        """The worker thread's native id (a Linux TID: what ``os.sched_setscheduler`` takes for one thread)."""
        return self._thread.native_id  # type: ignore[return-value]  # set once started, in __init__

    @property
    def busy(self) -> bool:
        """A call was submitted and its result not taken yet."""
        return self._busy

    def submit(self, fn: Callable[[Any], Any], arg: Any) -> None:
        """Start ``fn(arg)`` on the worker; only when not ``busy``."""
        if self._busy:
            raise RuntimeError("the policy worker is still running the previous call")
        if self._closed:
            raise RuntimeError("the policy worker is closed")
        self._busy = True
        self._job = (fn, arg)
        self._job_posted.release()

    def wait(self, timeout_s: float) -> bool:
        """Wait at most ``timeout_s`` seconds (real time) for the running call; True when its result is in."""
        if not self._busy:
            return False
        if self._result is not None:
            return True
        if timeout_s > 0.0 and self._result_posted.acquire(timeout=timeout_s):
            self._result_posted.release()  # stays posted until take(): a second wait() sees it too
            return True
        return self._result is not None

    def take(self) -> tuple[Any, BaseException | None]:
        """The finished call's (value, error) (the call must have finished: ``wait`` returned True)."""
        result = self._result
        if result is None:
            raise RuntimeError("the policy call has not finished")
        self._result_posted.acquire()  # posted with the result: never blocks
        self._result, self._busy = None, False
        return result

    def close(self) -> None:
        """Stop the worker after the running call (the thread is a daemon: a call that never returns is left)."""
        if self._closed:
            return
        self._closed = True
        if not self._busy or self._result is not None:  # the worker waits for a job: wake it to leave
            self._job_posted.release()  # (one still in its call leaves once it posts the result)

    def _serve(self) -> None:
        while True:
            self._job_posted.acquire()
            job, self._job = self._job, None
            if job is None:  # closed
                return
            fn, arg = job
            try:
                result: tuple[Any, BaseException | None] = (fn(arg), None)
            except BaseException as err:  # handed to the caller, which holds the arm
                result = (None, err)
            self._result = result
            self._result_posted.release()
            if self._closed:
                return
