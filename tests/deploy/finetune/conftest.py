"""Small policy packages for the fine-tuning tests: proportional controllers on the numpy PointReach env."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from torch import nn

from deploy.export.exporter import ExportConfig, export_package

POINT_ENV = "PointReach-v0"
POINT_KWARGS = {"delay": 1}
ACTION_SCALE_M = 0.05  # PointReach: metres per command unit per control step
GOAL_DIM = 3


class PController(nn.Module):
    """action = clip(gain * (desired - achieved) / scale + bias, -1, 1): reaches PointReach goals when gain ~ 0.5."""

    def __init__(self, gain: float, bias: float = 0.0) -> None:
        super().__init__()
        self.gain, self.bias = gain, bias

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        error = obs[:, -GOAL_DIM:] - obs[:, -2 * GOAL_DIM : -GOAL_DIM]
        return torch.clamp(self.gain * error / ACTION_SCALE_M + self.bias, -1.0, 1.0)


def small_export_config() -> ExportConfig:
    return ExportConfig(
        n_parity_obs=256,
        n_calibration_obs=384,
        n_episodes=4,
        latency_calls=8,
        build_engine=False,
        strict=False,
        allow_small_checks=True,
    )


def make_package(folder: Path, gain: float, bias: float = 0.0) -> Path:
    return export_package(
        PController(gain, bias),
        folder,
        env_id=POINT_ENV,
        env_kwargs=POINT_KWARGS,
        provenance={"algorithm": "p-controller", "gain": gain, "bias": bias},
        config=small_export_config(),
    )


@pytest.fixture(scope="session")
def packages(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Three packages: a good controller, a slightly different good one, and a broken one (drives into a wall)."""
    root = tmp_path_factory.mktemp("packages")
    return {
        "good": make_package(root / "good", gain=0.5),
        "good2": make_package(root / "good2", gain=0.45),
        "broken": make_package(root / "broken", gain=0.0, bias=1.0),
    }


@pytest.fixture(scope="session")
def package_factory():
    """make_package(folder, gain, bias) for tests that need their own controller."""
    return make_package


@pytest.fixture(scope="session")
def point_kwargs() -> dict:
    return dict(POINT_KWARGS)


@pytest.fixture(scope="session")
def export_config() -> ExportConfig:
    return small_export_config()
