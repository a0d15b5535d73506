"""Real-time scheduling for the control loop's thread (Linux SCHED_FIFO), entered and left explicitly."""

from __future__ import annotations

import os
from collections.abc import Callable


def enter_realtime(priority: int | None) -> Callable[[], None]:
    """Switch this thread to SCHED_FIFO at ``priority`` (None: leave the scheduler alone).

    :return: the function that restores the previous scheduling policy (a no-op when nothing was changed).
    :raises ValueError: on an OS without ``os.sched_setscheduler``.
    :raises PermissionError: when the OS refuses the priority; the message says how to grant it.
    """
    if priority is None:
        return lambda: None
    if not hasattr(os, "sched_setscheduler"):
        raise ValueError("realtime_priority needs Linux (os.sched_setscheduler); set it to None on this OS")
    old_policy, old_param = os.sched_getscheduler(0), os.sched_getparam(0)
    try:
        os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(priority))
    except PermissionError as err:
        raise PermissionError(
            f"SCHED_FIFO priority {priority} refused ({err}); run as root, grant CAP_SYS_NICE "
            "(setcap cap_sys_nice+ep on the interpreter) or raise the rtprio limit, or set realtime_priority=None"
        ) from err
    return lambda: os.sched_setscheduler(0, old_policy, old_param)
