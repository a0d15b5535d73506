"""Simulation: delayed-action FetchReach (MuJoCo) and a tiny numpy point-mass goal env, same contract.

Importing this package registers the ids with gymnasium (MuJoCo is only imported when a Fetch env is made):

- ``DelayedFetchReach-v0``: FetchReach-v4 with the calibration file's delay (default k=2);
- ``PointReach-v0``: the numpy point mass (default delay 1).
"""

from gymnasium.envs.registration import register, registry

try:  # gymnasium-robotics prints a notice about its Adroit envs on import (every process); we use only Fetch
    import farama_notifications

    farama_notifications.notifications.pop("gymnasium_robotics", None)
except ImportError:  # pragma: no cover - a gymnasium-robotics that does not use it
    pass

if "DelayedFetchReach-v0" not in registry:
    register(id="DelayedFetchReach-v0", entry_point="envs.delayed_fetch_reach:DelayedFetchReachEnv")
if "PointReach-v0" not in registry:
    register(id="PointReach-v0", entry_point="envs.point_reach:PointReachEnv")
