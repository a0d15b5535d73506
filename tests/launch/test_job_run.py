"""launch/job_run.py: what the run job hands the controller for a serial robot."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import launch.job_run as job_run
from launch.cli import validate_launch

ROOT = Path(__file__).resolve().parents[2]


PACKAGE = ROOT / "models" / "default"


class RecordedError(Exception):
    pass


def record_controller(monkeypatch) -> dict[str, object]:
    """Replace the Controller by one that records its arguments (port, contract, policy, ... and keywords) and
    raises RecordedError from run(): what the run job would hand the real one, without a robot."""
    seen: dict[str, object] = {}

    class Recorder:
        def __init__(self, port, contract, policy, *args, **kwargs) -> None:
            seen.update(port=port, contract=contract, policy=policy, **kwargs)

        def run(self):
            raise RecordedError

    monkeypatch.setattr("deploy.runtime.loop.Controller", Recorder)
    return seen


def serial_config(tmp_path: Path, name: str, **settings: object) -> dict:
    """A validated run config for one episode on a serial robot at ``loop://`` (115200 baud), ``settings`` on top."""
    goals = tmp_path / "goals.yaml"
    goals.write_text("- [1.3, 0.75, 0.55]\n")
    launch = {
        "job": "run",
        "name": name,
        "package": str(PACKAGE),
        "output": str(tmp_path),
        "goals_file": str(goals),
        "episodes": 1,
        "robot": {"kind": "serial", "port": "loop://", "baudrate": 115_200},
        **settings,
    }
    return validate_launch(launch, source="<test>")


def test_a_serial_robot_is_opened_at_the_launch_files_baud_rate(monkeypatch, tmp_path: Path):
    """robot.baudrate was validated and then dropped (the port opened at the default 1 Mbit/s)."""
    seen = record_controller(monkeypatch)
    with pytest.raises(RecordedError):
        job_run.run(serial_config(tmp_path, "baud"), tmp_path / "baud")
    assert seen["port"] == "loop://" and seen["baudrate"] == 115_200
    # the tick log names the package on every tick the policy was asked
    from deploy.runtime.package import load_package

    assert seen["policy_id"] == load_package(PACKAGE).policy_id and len(seen["policy_id"]) == 64


def test_a_followed_store_is_checked_against_the_running_contract_and_probed(monkeypatch, tmp_path: Path):
    """follow_store: the follower gets the contract the controller builds observations with, and the slot probes
    every new backend on one such observation (a NaN policy is refused before it reaches the arm)."""
    from deploy.finetune.promote import PackageStore
    from deploy.runtime import hotswap
    from deploy.runtime.package import load_package

    store = PackageStore(tmp_path / "store")
    store.install(PACKAGE, "shipped")
    store.promote("shipped", {"passed": True, "reasons": ["initial"]})
    followers: list[hotswap.StoreFollower] = []

    class RecordedFollower(hotswap.StoreFollower):
        def __init__(self, *args, **kwargs) -> None:
            super().__init__(*args, **kwargs)
            followers.append(self)

    monkeypatch.setattr(hotswap, "StoreFollower", RecordedFollower)
    seen = record_controller(monkeypatch)
    config = serial_config(tmp_path, "follow", package=str(store.resolve_current()), follow_store=str(store.root))
    with pytest.raises(RecordedError):
        job_run.run(config, tmp_path / "follow")
    contract = load_package(PACKAGE).contract
    assert len(followers) == 1 and followers[0].contract == contract == seen["contract"]
    slot = seen["policy"]
    assert isinstance(slot, hotswap.PolicySlot) and slot is followers[0].slot
    assert slot.entry().policy_id == load_package(PACKAGE).policy_id  # the store's copy: its source's id
    with pytest.raises(hotswap.SwapRefusedError, match="NaN"):
        slot.swap(lambda obs: np.full((len(obs), contract.action_dim), np.nan, np.float32), label="nan")
    probed: list[np.ndarray] = []
    slot.swap(lambda obs: probed.append(obs.copy()) or np.zeros((len(obs), contract.action_dim), np.float32))
    assert probed and probed[0].shape == (1, contract.flat_dim) and np.all(np.isfinite(probed[0]))
