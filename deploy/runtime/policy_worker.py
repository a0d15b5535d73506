"""Runs policy calls on one worker thread, so a late call never holds the control tick past its deadline.

numpy-free, robot side. Python cannot interrupt a stuck native call (an inference engine waiting on a device, a
page fault, a lock), so the call runs here and the tick waits for it only until its deadline. A call still running
at the next tick is not called again: the tick holds, and once the call returns its answer is dropped (it answers an
older observation) and the next tick asks anew. The worker is a daemon thread: a call that never returns does not
keep the process alive after the run.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any


class PolicyWorker:
    """One call at a time on a worker thread; the caller waits at most as long as it says."""

    def __init__(self) -> None:
        self._ready = threading.Condition()
        self._job: tuple[Callable[[Any], Any], Any] | None = None
        self._result: tuple[Any, BaseException | None] | None = None
        self._busy = False
        self._closed = False
        self._thread = threading.Thread(target=self._serve, name="policy-worker", daemon=True)
        self._thread.start()

    @property
    def busy(self) -> bool:
        """A call was submitted and its result not taken yet."""
        return self._busy

    def submit(self, fn: Callable[[Any], Any], arg: Any) -> None:
        """Start ``fn(arg)`` on the worker; only when not ``busy``."""
        with self._ready:
            if self._busy:
                raise RuntimeError("the policy worker is still running the previous call")
            self._busy = True
            self._result = None
            self._job = (fn, arg)
            self._ready.notify_all()

    def wait(self, timeout_s: float) -> bool:
        """Wait at most ``timeout_s`` seconds (real time) for the running call; True when its result is in."""
        with self._ready:
            return self._ready.wait_for(lambda: self._result is not None, max(0.0, timeout_s))

    def take(self) -> tuple[Any, BaseException | None]:
        """The finished call's (value, error) (the call must have finished: ``wait`` returned True)."""
        with self._ready:
            if self._result is None:
                raise RuntimeError("the policy call has not finished")
            result, self._result, self._busy = self._result, None, False
            return result

    def close(self) -> None:
        """Stop the worker after the running call (the thread is a daemon: a call that never returns is left)."""
        with self._ready:
            self._closed = True
            self._ready.notify_all()

    def _serve(self) -> None:
        while True:
            with self._ready:
                self._ready.wait_for(lambda: self._job is not None or self._closed)
                if self._job is None:
                    return
                fn, arg = self._job
                self._job = None
            try:
                result: tuple[Any, BaseException | None] = (fn(arg), None)
            except BaseException as err:  # handed to the caller, which holds the arm
                result = (None, err)
            with self._ready:
                self._result = result
                self._ready.notify_all()
