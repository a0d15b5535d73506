"""Fault models of the simulated robot: each fault a small class with its parameters, scheduled in robot ticks.

The library (``envs.faults.catalogue.FAULT_KINDS`` lists them by name):

- sensor (``sensor.py``): freeze, offset step, offset drift, scale, noise, NaN state, a frozen sender;
- actuator (``actuator.py``): motor stall, gain change mid-run;
- link (``link.py``): outage, byte corruption, reply latency, dropped / duplicated / reordered / delayed frames;
- clock (``clock.py``): clock jump, clock drift, sequence jump;
- robot (``robot.py``): controller reboot, e-stop ignored, HOMED without homing, a stray HOMED flag, the robot's
  own e-stop, an unprompted home.

A fault acts through ``envs.sim_faults.SimFaults``: the switches it already had (``link_cut``, ``corrupt_prob``,
``reply_delay_periods``, ...) and the hooks of the fault models active now (``SimFaults.models``). A
``FaultSchedule`` (``schedule.py``) begins and ends each fault at its robot tick (one tick = one message the robot
received), so a lock-step run replays the same faults at the same moments.
"""

from envs.faults.base import RobotFault
from envs.faults.schedule import FaultSchedule, ScheduledFault

__all__ = ["FaultSchedule", "RobotFault", "ScheduledFault"]
