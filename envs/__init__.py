"""Simulation: snapshots and actuation delay for any MuJoCo gymnasium env, the delayed Fetch tasks, a numpy goal env.

Importing this package registers the ids with gymnasium (MuJoCo is only imported when a Fetch env is made):

- ``DelayedFetchReach-v0``: FetchReach-v4 with the calibration file's delay (default k=2), the robot task;
- ``DelayedFetchPush-v0``, ``DelayedFetchPickAndPlace-v0``, ``DelayedFetchSlide-v0``: the other Fetch tasks with
  the generic delay wrapper (default k=2) and snapshots (``envs.delayed_fetch``);
- ``DelayedFetchPushRobot-v0``: the push task as the simulated push cell serves it (contract with the block, spec
  ``calibration/sim_fetch_push.yaml`` with its block tracker; ``envs.delayed_fetch_push``);
- ``PointReach-v0``: the numpy point mass (default delay 1);
- ``TwoArmCell-v0``: two delayed Fetch arms across one table with crossing goals (``envs.two_arm_cell``; its
  PettingZoo ParallelEnv: ``envs.two_arm_cell_parallel_env(**kwargs)``), ``CellSoloReach-v0``, one arm of the
  cell alone (``envs.cell_solo``), and ``CellArmView-v0``, one arm of the cell in its package's layout, the partner
  scripted (``envs.cell_arm_view``: an arm package's export checks).

Bring your own MuJoCo env: ``with_snapshots(ActionDelay(env, delay=2))`` (or ``with_snapshots(env)`` without delay)
gives it the snapshot API GRPO's group resets need; both names are importable from here.
"""

from __future__ import annotations

from typing import Any

from gymnasium.envs.registration import register, registry

from envs.delayed_fetch import register_delayed_fetch_tasks

try:  # gymnasium-robotics prints a notice about its Adroit envs on import (every process); we use only Fetch
    import farama_notifications

    farama_notifications.notifications.pop("gymnasium_robotics", None)
except ImportError:  # pragma: no cover - a gymnasium-robotics that does not use it
    pass

if "DelayedFetchReach-v0" not in registry:
    register(id="DelayedFetchReach-v0", entry_point="envs.delayed_fetch_reach:DelayedFetchReachEnv")
if "DelayedFetchPushRobot-v0" not in registry:
    register(id="DelayedFetchPushRobot-v0", entry_point="envs.delayed_fetch_push:DelayedFetchPushEnv")
if "PointReach-v0" not in registry:
    register(id="PointReach-v0", entry_point="envs.point_reach:PointReachEnv")
if "TwoArmCell-v0" not in registry:
    register(id="TwoArmCell-v0", entry_point="envs.two_arm_cell:TwoArmCellEnv")
if "CellSoloReach-v0" not in registry:
    register(id="CellSoloReach-v0", entry_point="envs.cell_solo:CellSoloReachEnv")
if "CellArmView-v0" not in registry:
    register(id="CellArmView-v0", entry_point="envs.cell_arm_view:CellArmView")
register_delayed_fetch_tasks()

_LAZY = {
    "with_snapshots": "envs.snapshots",
    "SnapshotWrapper": "envs.snapshots",
    "ActionDelay": "envs.action_delay",
    "two_arm_cell_parallel_env": "envs.two_arm_cell_parallel",
}
__all__ = ["ActionDelay", "SnapshotWrapper", "two_arm_cell_parallel_env", "with_snapshots"]


def __getattr__(name: str) -> Any:
    """``envs.with_snapshots`` etc. without importing MuJoCo on ``import envs``."""
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'envs' has no attribute {name!r}")
