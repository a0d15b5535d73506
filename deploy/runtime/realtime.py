"""Real-time scheduling for the control loop's threads (Linux SCHED_FIFO, one CPU), entered and left explicitly."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Sequence

MAX_RT_PRIORITY = 99  # Linux SCHED_FIFO priorities are 1..99


def enter_realtime(priority: int | None, threads: Sequence[int] = ()) -> Callable[[], None]:
    """Switch this thread and ``threads`` (native thread ids, ``threading.get_native_id``) to SCHED_FIFO at
    ``priority`` (None: leave the scheduler alone).

    The loop's helpers must run at its priority: a loop thread at SCHED_FIFO that waits on a policy thread of normal
    priority waits for whatever else the machine runs first (priority inversion), which is the tail of the tick.

    :return: the function that restores every changed thread's previous scheduling policy (a no-op when nothing was
        changed).
    :raises ValueError: a priority outside 1..99, or an OS without ``os.sched_setscheduler``.
    :raises PermissionError: when the OS refuses the priority; the message says how to grant it. Threads already
        switched are restored first.
    """
    if priority is None:
        return lambda: None
    if not 1 <= priority <= MAX_RT_PRIORITY:
        raise ValueError(f"a SCHED_FIFO priority is in 1..{MAX_RT_PRIORITY}, got {priority}")
    if not hasattr(os, "sched_setscheduler"):
        raise ValueError("realtime_priority needs Linux (os.sched_setscheduler); set it to None on this OS")
    changed: list[tuple[int, int, os.sched_param]] = []

    def restore() -> None:
        for tid, policy, param in reversed(changed):
            with contextlib.suppress(ProcessLookupError):  # that thread has ended: nothing left to restore
                os.sched_setscheduler(tid, policy, param)

    for tid in (0, *threads):
        old = (tid, os.sched_getscheduler(tid), os.sched_getparam(tid))
        try:
            os.sched_setscheduler(tid, os.SCHED_FIFO, os.sched_param(priority))
        except PermissionError as err:
            restore()
            raise PermissionError(
                f"SCHED_FIFO priority {priority} refused ({err}); run as root, grant CAP_SYS_NICE "
                "(setcap cap_sys_nice+ep on the interpreter) or raise the rtprio limit, or set realtime_priority=None"
            ) from err
        changed.append(old)
    return restore


def pin_threads(cpu: int | None, threads: Sequence[int] = ()) -> Callable[[], None]:
    """Pin this thread and ``threads`` (native thread ids) to CPU ``cpu`` (None: leave the affinity alone).

    A SCHED_FIFO thread woken while its waker still runs is pushed to another CPU (an inter-processor interrupt and
    a cold cache): the policy call's hand-off to its thread and back took 90 us at p50 (155 us p99) with the two
    free to move, 32 us (64 us) pinned to one CPU (``benchmarks`` idle 2-core VM). The loop waits while its policy
    runs, so one CPU loses no parallelism; on a real robot it is the isolated core the runtime owns.

    :return: the function that restores every changed thread's previous affinity.
    :raises ValueError: ``cpu`` is not one this process may run on (``os.sched_getaffinity(0)``), or the OS has no
        ``os.sched_setaffinity``.
    """
    if cpu is None:
        return lambda: None
    if not hasattr(os, "sched_setaffinity"):
        raise ValueError("cpu pinning needs Linux (os.sched_setaffinity); set it to None on this OS")
    allowed = os.sched_getaffinity(0)
    if cpu not in allowed:
        raise ValueError(f"CPU {cpu} is not one this process may run on ({sorted(allowed)}); pick one of them")
    changed: list[tuple[int, set[int]]] = []

    def restore() -> None:
        for tid, cpus in reversed(changed):
            with contextlib.suppress(ProcessLookupError):  # that thread has ended
                os.sched_setaffinity(tid, cpus)

    for tid in (0, *threads):
        changed.append((tid, os.sched_getaffinity(tid)))
        os.sched_setaffinity(tid, {cpu})
    return restore
