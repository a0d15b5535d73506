"""Session fixtures for the export tests (helpers in export_fixtures.py)."""

from __future__ import annotations

from pathlib import Path

import pytest
from export_fixtures import POINT_ENV_ID, POINT_ENV_KWARGS, TinyGoalPolicy, train_bc_policy

from deploy.export.exporter import ExportConfig, export_package


@pytest.fixture(scope="session")
def bc_policy() -> TinyGoalPolicy:
    return train_bc_policy()


@pytest.fixture(scope="session")
def point_package(bc_policy: TinyGoalPolicy, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A full-size package (10k parity observations, 100 episodes) of the BC policy on PointReach."""
    out = tmp_path_factory.mktemp("pkg") / "point_reach"
    return export_package(
        bc_policy,
        out,
        env_id=POINT_ENV_ID,
        env_kwargs=POINT_ENV_KWARGS,
        provenance={"algorithm": "behaviour cloning of a scripted expert (test fixture)", "seed": 0},
        config=ExportConfig(latency_calls=1_000),
    )
