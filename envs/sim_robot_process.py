"""The simulated robot in its own process: keeps MuJoCo out of the process being measured or run.

process = SimRobotProcess(mode="realtime", delay=2)   # SimRobot arguments
port = process.port_name                              # its pty
...
counts = process.stop()                               # the robot's counters
"""

from __future__ import annotations

import multiprocessing as mp
import os
import threading
from typing import Any

from envs.sim_robot import SimRobot


def _serve_child(conn: Any, kwargs: dict[str, Any], priority: int | None, robot_class: type = SimRobot) -> None:
    if priority is not None:
        os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(priority))  # the serving thread inherits it
    robot = robot_class(**kwargs)
    conn.send(robot.port_name)
    thread = threading.Thread(target=robot.serve, daemon=True)
    thread.start()
    conn.recv()  # any message (or the parent closing the pipe) means stop
    robot._stop_event.set()
    thread.join()
    conn.send(dict(robot.counts, steps=robot.steps))
    robot.stop()


PROCESS_START_TIMEOUT_S = 120.0  # spawn + importing MuJoCo on a loaded 2-core machine
PROCESS_STOP_TIMEOUT_S = 30.0


class SimRobotProcess:
    """A ``SimRobot`` in its own process; ``port_name`` is its pty. ``stop()`` returns the robot's counters.

    :param priority: SCHED_FIFO priority of the robot process (Linux, root / CAP_SYS_NICE), like a robot
        controller's real-time firmware; None keeps the default scheduler.
    :param robot_class: what to serve: ``SimRobot``, or ``envs.sim_cell_robot.SimCellRobot`` (its ``port_name`` is
        then one port per arm, and ``stop()`` also returns its separation record).
    :param kwargs: the robot class's arguments.
    """

    def __init__(self, priority: int | None = None, robot_class: type = SimRobot, **kwargs: Any) -> None:
        ctx = mp.get_context("spawn")
        self._conn, child = ctx.Pipe()
        self.process = ctx.Process(target=_serve_child, args=(child, kwargs, priority, robot_class), daemon=True)
        self.process.start()
        child.close()  # only the child holds it now: if the child dies, recv() raises EOFError instead of hanging
        self.port_name: Any = self._receive(PROCESS_START_TIMEOUT_S, "start")

    def _receive(self, timeout_s: float, what: str) -> Any:
        try:
            if self._conn.poll(timeout_s):
                return self._conn.recv()
        except EOFError:
            pass
        self.process.kill()
        self.process.join()
        raise RuntimeError(
            f"the simulated robot process did not {what} within {timeout_s} s (exit code {self.process.exitcode}); "
            "run SimRobot in this process to see its error"
        )

    def stop(self) -> dict[str, Any]:
        self._conn.send("stop")
        counts = self._receive(PROCESS_STOP_TIMEOUT_S, "stop")
        self.process.join()
        return counts
