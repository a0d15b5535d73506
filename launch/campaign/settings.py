"""The campaign's settings, and the robot spec and loop config every run uses.

Time scale: the campaign runs the loop at ``period_s`` (10 ms by default) instead of the robot's real control
period (40 ms), so every setting in seconds that the loop or spec holds (watchdog, policy fault time, e-stop
acknowledgement, recovery and startup timeouts) is scaled by ``period_s / spec.control_period_s``: a run meets the
same settings per tick as on the robot, four times faster. The physics is unchanged (one control step per command).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, fields, replace
from pathlib import Path
from typing import Any

from deploy.robot_spec import RobotSpec, load_robot_spec
from deploy.runtime.loop_config import LoopConfig
from deploy.shipped import resolve_path

CAMPAIGN_NOISE_STD_M = 0.001  # the campaign robot's spec noise (metres): a noise fault up to it is within the spec
# the robot's real-time settings (seconds at its real period), scaled by the campaign's time scale
REAL_POLICY_FAULT_STOP_S = LoopConfig.policy_fault_stop_s
REAL_STOP_ACK_TIMEOUT_S = LoopConfig.stop_ack_timeout_s
REAL_RECOVER_TIMEOUT_S = 4.0  # not the default minute: a campaign run that cannot recover ends soon
REAL_STARTUP_TIMEOUT_S = LoopConfig.startup_timeout_s
TICK_LIMIT_SLACK = 400  # ticks beyond the episodes' own that a run may take (stops, recoveries, re-homes)
EPISODE_OVERHEAD_TICKS = 3  # hold + home ticks per episode, beyond its policy steps


@dataclass(frozen=True)
class CampaignSettings:
    """What every run of a campaign shares.

    :param period_s: the loop's period (seconds; the lock-step robot steps once per command).
    :param episodes: goals per run.
    :param episode_steps: policy commands per episode (control steps).
    :param max_faults: robot faults per run, at most.
    :param max_fault_ticks: longest fault, in robot ticks (about one per control period).
    :param run_timeout_s: wall seconds after which a run counts as hung (its worker is killed and replaced).
    :param package: the policy package (one of the policies): a folder, or ``shipped:<path>`` (``deploy.shipped``).
    :param box_tolerance_m: how far outside the workspace box the true gripper may be (metres).
    """

    period_s: float = 0.01
    episodes: int = 2
    episode_steps: int = 15
    max_faults: int = 3
    max_fault_ticks: int = 60
    run_timeout_s: float = 30.0
    package: str = "shipped:models/default"
    box_tolerance_m: float = 0.001

    def __post_init__(self) -> None:
        for name in ("period_s", "run_timeout_s", "box_tolerance_m"):
            if not getattr(self, name) > 0:
                raise ValueError(f"campaign setting {name} must be > 0, got {getattr(self, name)}")
        for name in ("episodes", "episode_steps", "max_fault_ticks"):
            if getattr(self, name) < 1:
                raise ValueError(f"campaign setting {name} must be >= 1, got {getattr(self, name)}")
        if self.max_faults < 0:
            raise ValueError(f"campaign setting max_faults must be >= 0, got {self.max_faults}")

    @classmethod
    def from_mapping(cls, data: dict[str, Any]) -> CampaignSettings:
        """The settings among ``data``'s keys (others ignored: a launch config holds more)."""
        names = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in data.items() if k in names})

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)

    def base_spec(self) -> RobotSpec:
        """The simulated robot's spec (calibration/sim_fetch.yaml) with the campaign's noise allowance."""
        return replace(load_robot_spec(), observation_noise_std_m=(CAMPAIGN_NOISE_STD_M,) * 3)

    def time_scale(self, spec: RobotSpec) -> float:
        """Campaign seconds per robot second."""
        return self.period_s / spec.control_period_s

    def spec(self) -> RobotSpec:
        """The spec the controller runs with: the base spec, its watchdog scaled to the campaign's time."""
        base = self.base_spec()
        scale = self.time_scale(base)
        return replace(base, watchdog_hold_s=base.watchdog_hold_s * scale, watchdog_stop_s=base.watchdog_stop_s * scale)

    @property
    def package_path(self) -> Path:
        """The package's folder on this machine (``shipped:`` resolved; any other path as the shell means it)."""
        return resolve_path(self.package)

    @property
    def horizon_ticks(self) -> int:
        """Robot ticks a run takes without faults (about): where fault starts are drawn."""
        return self.episodes * (self.episode_steps + EPISODE_OVERHEAD_TICKS)

    def loop_config(self) -> LoopConfig:
        scale = self.time_scale(self.base_spec())
        return LoopConfig(
            period_s=self.period_s,
            max_episode_steps=self.episode_steps,
            policy_fault_stop_s=REAL_POLICY_FAULT_STOP_S * scale,
            stop_ack_timeout_s=REAL_STOP_ACK_TIMEOUT_S * scale,
            recover_timeout_s=REAL_RECOVER_TIMEOUT_S * scale,
            startup_timeout_s=REAL_STARTUP_TIMEOUT_S * scale,
            max_ticks=self.horizon_ticks + TICK_LIMIT_SLACK,
            freeze_gc=False,
        )
